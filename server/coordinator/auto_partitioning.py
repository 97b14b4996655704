"""Auto-partitioning (docs/contract.md, "Partitioned tables and bucket keys"): the coordinator keeps time partitions ahead and drops old ones.

For a table with ``table.auto-partition.enabled=true`` (one partition key), every check
(``coordinator.auto-partition.check-interval``, and once when the table is created) makes sure the
partitions of the current time unit and the ``num-precreate - 1`` after it exist, and drops those
older than the ``num-retention`` before the current one. As in Fluss, partition names are the time
in ``table.auto-partition.time-zone``: ``yyyy`` (year), ``yyyyMM`` (month), ``yyyyMMdd`` (day),
``yyyyMMddHH`` (hour). Partitions whose names are not of that form (created by hand) are left alone.
Dropping a partition drops its log only; what the lake holds of it stays.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable, Mapping, Protocol, Sequence
from zoneinfo import ZoneInfo

from lakelog.errors import InvalidTableError, LakelogError, PartitionNotInLakeError
from lakelog.metadata import PartitionInfo, TableInfo, TablePath
from lakelog.server.coordinator.table_properties import (
    AUTO_PARTITION_ENABLED,
    AUTO_PARTITION_NUM_PRECREATE,
    AUTO_PARTITION_NUM_RETENTION,
    AUTO_PARTITION_TIME_UNIT,
    AUTO_PARTITION_TIME_ZONE,
    TIME_UNIT_FORMATS,
    table_property,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AutoPartitionSpec:
    unit: str
    precreate: int
    retention: int
    zone: ZoneInfo

    def names(self, now: datetime) -> tuple[list[str], str]:
        """The partition names to have at ``now`` (current first) and the oldest name to keep."""
        current = _truncate(now.astimezone(self.zone), self.unit)
        wanted = [_shift(current, self.unit, step).strftime(TIME_UNIT_FORMATS[self.unit]) for step in range(self.precreate)]
        return wanted, _shift(current, self.unit, -self.retention).strftime(TIME_UNIT_FORMATS[self.unit])

    def is_auto_name(self, name: str) -> bool:
        try:
            return datetime.strptime(name, TIME_UNIT_FORMATS[self.unit]).strftime(TIME_UNIT_FORMATS[self.unit]) == name
        except ValueError:
            return False


def auto_partition_spec(path: TablePath, properties: Mapping[str, str], partition_keys: Sequence[str]) -> AutoPartitionSpec | None:
    """A table's auto-partitioning, None when off; refused unless the table has one partition key."""
    where = f"table {path}"
    if not table_property(where, properties, AUTO_PARTITION_ENABLED):
        return None
    if len(partition_keys) != 1:
        raise InvalidTableError(
            f"{where}: {AUTO_PARTITION_ENABLED}=true needs exactly one partition key, it has {list(partition_keys) or 'none'}"
        )
    spec = AutoPartitionSpec(
        table_property(where, properties, AUTO_PARTITION_TIME_UNIT),
        table_property(where, properties, AUTO_PARTITION_NUM_PRECREATE),
        table_property(where, properties, AUTO_PARTITION_NUM_RETENTION),
        table_property(where, properties, AUTO_PARTITION_TIME_ZONE),
    )
    try:
        spec.names(datetime.now(timezone.utc))
    except (OverflowError, ValueError):
        raise InvalidTableError(
            f"{where}: {AUTO_PARTITION_NUM_PRECREATE}={spec.precreate} and {AUTO_PARTITION_NUM_RETENTION}={spec.retention}"
            f" {spec.unit}s reach past the years 1 to 9999 a partition name can hold"
        ) from None
    return spec


def _truncate(moment: datetime, unit: str) -> datetime:
    if unit == "year":
        return moment.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "month":
        return moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "day":
        return moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return moment.replace(minute=0, second=0, microsecond=0)


def _shift(moment: datetime, unit: str, steps: int) -> datetime:
    if unit in ("year", "month"):
        months = moment.year * 12 + moment.month - 1 + steps * (12 if unit == "year" else 1)
        return moment.replace(year=months // 12, month=months % 12 + 1)
    if unit == "day":
        return moment + timedelta(days=steps)
    return moment + timedelta(hours=steps)




class PartitionKeeper(Protocol):
    """What the auto-partitioner needs of the coordinator."""

    def tables(self) -> list[TableInfo]: ...

    def list_partitions_of(self, info: TableInfo) -> list[PartitionInfo]: ...

    def create_partition(self, path: TablePath, spec: Mapping[str, object], ignore_if_exists: bool = False) -> PartitionInfo: ...

    def drop_partition(self, path: TablePath, spec: Mapping[str, object], ignore_if_not_exists: bool = False) -> None: ...


class AutoPartitioner:
    """Runs the checks every ``interval_ms`` on a thread of its own; ``clock`` gives the time now."""

    def __init__(
        self, keeper: PartitionKeeper, interval_ms: int, clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)
    ) -> None:
        self._keeper = keeper
        self._interval_s = interval_ms / 1000
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="auto-partitioning", daemon=True)

    def start(self) -> "AutoPartitioner":
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.check_all()

    def check_all(self) -> None:
        for info in self._keeper.tables():
            self.check(info)

    def check(self, info: TableInfo) -> None:
        """Create the partitions due and drop the expired ones of one table; a failure is logged
        (the next check tries again) and stops nothing else."""
        try:
            spec = auto_partition_spec(info.path, info.properties, info.partition_keys)
            if spec is None:
                return
            key = info.partition_keys[0]
            wanted, oldest_kept = spec.names(self._clock())
            for name in wanted:
                self._keeper.create_partition(info.path, {key: name}, ignore_if_exists=True)
            for partition in self._keeper.list_partitions_of(info):
                name = partition.partition_name
                if spec.is_auto_name(name) and name < oldest_kept and not partition.lake_only:
                    try:
                        self._keeper.drop_partition(info.path, {key: name}, ignore_if_not_exists=True)
                    except PartitionNotInLakeError as waiting:
                        log.info("auto-partitioning of %s: partition %s waits for the lake: %s", info.path, name, waiting)
                        continue
                    log.info("auto-partitioning of %s: dropped partition %s (older than %s)", info.path, name, oldest_kept)
        except LakelogError as error:
            log.warning("auto-partitioning of %s failed, tried again in %.0f s: %s", info.path, self._interval_s, error)
