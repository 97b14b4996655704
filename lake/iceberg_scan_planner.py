"""Which data files of a lake snapshot hold a bucket's offsets, in offset order.

A snapshot never changes, so each one is planned once: one PyIceberg ``plan_files`` without a
bucket filter, its files grouped by their partition values (a partitioned log table's partition
keys, then ``__bucket``) and kept with the bounds of
``__offset`` and ``__timestamp`` from their statistics. Every later read or timestamp lookup at
that snapshot prunes from those bounds. A bucket's files never overlap in offsets (each tiering
round appends the next range; compaction merges only neighbouring files), so ordering them by their ``__offset`` lower bound and reading one
after the other yields the log.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterable

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.table import FileScanTask, ManifestGroupPlanner, Table
from pyiceberg.types import LongType

from lakelog.errors import LakeDataError
from lakelog.lake.lake_catalog import lake_call
from lakelog.metadata import PARTITION_NAME_SEPARATOR
from lakelog.record.meta_columns import OFFSET_COLUMN, TIMESTAMP_COLUMN

MAX_OFFSET = (1 << 63) - 1
# Readers work at the few newest snapshots; older plans are dropped first.
PLANNED_SNAPSHOTS = 8


@dataclass(frozen=True, slots=True)
class LakeDataFile:
    """A data file holding offsets ``first_offset..last_offset`` (its statistics' bounds), whose
    largest ``__timestamp`` (µs) is ``max_timestamp_us`` (None: the file has no such bound), of
    ``size_bytes`` and ``record_count`` rows."""

    path: str
    first_offset: int
    last_offset: int
    max_timestamp_us: int | None = None
    size_bytes: int = 0
    record_count: int = 0


# A bucket of a lake table: the log partition's name ("" without partitions) and the bucket.
PartitionBucket = tuple[str, int]


def snapshot_data_files(table: Table, snapshot_id: int) -> list[DataFile]:
    """Every data file of snapshot ``snapshot_id`` (a lake table has no delete files: refused).

    Manifests that list only deleted files are not read (as Iceberg's own planner skips them): the
    snapshot a compaction commits carries every file it replaced as a deleted entry, and decoding
    thousands of those would cost its first readers more than the compaction saved them."""

    def plan() -> list[FileScanTask]:
        snapshot = table.snapshot_by_id(snapshot_id)
        if snapshot is None:
            return []
        live = [m for m in snapshot.manifests(table.io) if m.has_added_files() or m.has_existing_files()]
        return list(ManifestGroupPlanner(table.metadata, table.io).plan_files(live))

    tasks = lake_call(f"cannot plan a read of {'.'.join(table.name())} snapshot {snapshot_id}", plan)
    for task in tasks:
        if task.delete_files:
            raise LakeDataError(f"lake data file {task.file.file_path} has delete files; lakelog lake tables are append-only")
    return [task.file for task in tasks]


def plan_snapshot_files(table: Table, snapshot_id: int) -> dict[PartitionBucket, list[LakeDataFile]]:
    """Every data file of snapshot ``snapshot_id``, by (log partition, bucket), each bucket's by
    first offset."""
    return files_by_bucket(table, snapshot_data_files(table, snapshot_id))


def files_by_bucket(table: Table, files: Iterable[DataFile]) -> dict[PartitionBucket, list[LakeDataFile]]:
    """``files`` by (log partition, bucket), each bucket's by first offset. A file's Iceberg
    partition is the log partition's key values (identity, in key order: joined by ``$`` they are
    its name) then ``__bucket``."""
    schema = table.schema()
    offset_id = schema.find_field(OFFSET_COLUMN).field_id
    timestamp = schema.find_field(TIMESTAMP_COLUMN)
    by_bucket: dict[PartitionBucket, list[LakeDataFile]] = {}
    for data in files:
        lower, upper = (data.lower_bounds or {}).get(offset_id), (data.upper_bounds or {}).get(offset_id)
        if lower is None or upper is None:
            raise LakeDataError(f"lake data file {data.file_path} has no {OFFSET_COLUMN} bounds to order it by")
        values = [data.partition[i] for i in range(len(data.partition))] if data.partition is not None else []
        if not values or values[-1] is None:
            raise LakeDataError(f"lake data file {data.file_path} has no __bucket partition value")
        bucket = values[-1]
        partition_name = PARTITION_NAME_SEPARATOR.join(str(value) for value in values[:-1])
        max_ts = (data.upper_bounds or {}).get(timestamp.field_id)
        by_bucket.setdefault((partition_name, int(bucket)), []).append(
            LakeDataFile(
                data.file_path,
                from_bytes(LongType(), lower),
                from_bytes(LongType(), upper),
                None if max_ts is None else int(from_bytes(timestamp.field_type, max_ts)),
                data.file_size_in_bytes,
                data.record_count,
            )
        )
    for bucket_files in by_bucket.values():
        bucket_files.sort(key=lambda f: f.first_offset)
    return by_bucket


class SnapshotFiles:
    """The planned files of a lake table's last :data:`PLANNED_SNAPSHOTS` snapshots (one per table)."""

    def __init__(self, capacity: int = PLANNED_SNAPSHOTS) -> None:
        self._capacity = capacity
        self._plans: OrderedDict[int, dict[PartitionBucket, list[LakeDataFile]]] = OrderedDict()
        self._lock = threading.Lock()

    def bucket_files(
        self,
        table: Table,
        snapshot_id: int,
        bucket: int,
        start: int = 0,
        end: int = MAX_OFFSET,
        min_timestamp_ms: int | None = None,
        partition_name: str = "",
    ) -> list[LakeDataFile]:
        """Files of snapshot ``snapshot_id`` that may hold offsets ``[start, end)`` of ``bucket`` of
        log partition ``partition_name`` (only that partition's files: pruned by its partition
        values), and, with ``min_timestamp_ms``, a commit timestamp at or after it, by first offset."""
        min_timestamp_us = None if min_timestamp_ms is None else min_timestamp_ms * 1000
        return [
            file
            for file in self._plan(table, snapshot_id).get((partition_name, bucket), [])
            if file.last_offset >= start
            and file.first_offset < end
            and (min_timestamp_us is None or file.max_timestamp_us is None or file.max_timestamp_us >= min_timestamp_us)
        ]

    def _plan(self, table: Table, snapshot_id: int) -> dict[PartitionBucket, list[LakeDataFile]]:
        # Planned under the lock: readers of one snapshot wait for its one plan instead of each planning it.
        with self._lock:
            plan = self._plans.get(snapshot_id)
            if plan is None:
                plan = self._plans[snapshot_id] = plan_snapshot_files(table, snapshot_id)
                while len(self._plans) > self._capacity:
                    self._plans.popitem(last=False)
            else:
                self._plans.move_to_end(snapshot_id)
            return plan
