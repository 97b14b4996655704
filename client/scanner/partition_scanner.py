"""The scanner of a partitioned table: one :class:`LogScanner` per subscribed partition, polled together.

Each partition is a set of buckets of its own, so each has a LogScanner of its own (offset order,
tiers, cursors and resets work per ``(partition, bucket)`` as they do per bucket of a table). Buckets
are keyed ``(partition_id, bucket)`` in positions and in what a poll returns; every record carries its
``partition_id`` and the columnar form a ``__partition_id`` column.

:meth:`subscribe_from_beginning` and :meth:`subscribe_from_timestamp` take every partition there is
and, every ``client.scanner.partition-discovery.interval``, every partition created since. A partition
that is dropped ends its subscriptions: its scanner is closed, logged once, and polls go on. A
lake-enabled table's partition is dropped from the log only once the lake holds it, and stays
listed as lake-only: a whole-table subscription reads it from the lake
(:class:`~lakelog.client.scanner.lake_partition_scanner.LakePartitionScanner`), and a scanner that
was reading its log when it was dropped reads on from the lake where it stopped.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterable

import pyarrow as pa

from lakelog.config import Configuration
from lakelog.errors import InvalidPartitionError, InvalidRequestError, LakelogError, PartitionNotExistError, TableNotExistError
from lakelog.metadata import OffsetSpec, OffsetType, TableInfo
from lakelog.client.metadata_cache import MetadataCache
from lakelog.client.scanner.batch_decoder import constant_array
from lakelog.client.scanner.log_fetcher import IDLE_WAIT_S
from lakelog.client.scanner.lake_partition_scanner import LakePartitionScanner
from lakelog.client.scanner.log_scanner import LogScanner
from lakelog.client.scanner.polled_scanner import PolledScanner
from lakelog.client.scanner.read_ahead_budget import ReadAheadBudget
from lakelog.client.scanner.record_quota import RecordQuota
from lakelog.client.scanner.scan_records import ScanRecords
from lakelog.client.table_bucket import TableBucket
from lakelog.record.meta_columns import PARTITION_ID_FIELD, with_meta_fields

log = logging.getLogger(__name__)

# Between two rounds over the partitions' scanners when none had records (each round sends fetches
# that the servers hold up to client.scanner.fetch.max-wait, so this only bounds the wake-up delay).
ROUND_WAIT_S = 0.02

# How to make a lake-only partition's scanner, reading ahead against the given budget.
MakeLakeScanner = Callable[[ReadAheadBudget], LakePartitionScanner]


class PartitionedLogScanner(PolledScanner):
    def __init__(
        self,
        info: TableInfo,
        projection: list[int] | None,
        new_scanner: Callable[[TableInfo, ReadAheadBudget], LogScanner],
        metadata: MetadataCache,
        conf: Configuration,
        lake_only: "Callable[[], dict[int, MakeLakeScanner]] | None" = None,
    ) -> None:
        """``new_scanner(partition_info, budget)``: the LogScanner of one partition; ``lake_only()``:
        per lake-only partition id, how to make its scanner (none without the lake). Every
        partition's scanner reads ahead against one budget (``client.scanner.max-buffered-bytes``):
        it bounds this scanner, whatever its number of partitions."""
        self._info = info
        self._new_scanner = new_scanner
        self._lake_only = lake_only or dict
        self._metadata = metadata
        fields = [info.schema.field(i) for i in projection] if projection else list(info.schema)
        self.schema = pa.schema(fields)
        self._out_schema = with_meta_fields(self.schema).append(PARTITION_ID_FIELD)
        self._scanners: dict[int, LogScanner | LakePartitionScanner] = {}
        self._budget = ReadAheadBudget(conf.get("client.scanner.max-buffered-bytes"))
        # subscribe_from_beginning/timestamp: the spec and buckets every discovered partition starts with
        self._whole: tuple[OffsetSpec, list[int] | None] | None = None
        self._discovery_s = conf.get("client.scanner.partition-discovery.interval") / 1000
        self._discovered_at = float("-inf")
        self._max_poll_records: int = conf.get("client.scanner.max-poll-records")
        self._rounds = 0

    # subscriptions

    def _partition(self, partition_id: int) -> TableInfo:
        for refresh in (False, True):
            for partition in self._metadata.partitions(self._info, refresh=refresh).values():
                if partition.partition_id == partition_id:
                    return partition
        raise PartitionNotExistError(f"{self._info.path} has no partition with id {partition_id}")

    def _scanner(self, partition: TableInfo) -> LogScanner:
        assert partition.partition_id is not None
        scanner = self._scanners.get(partition.partition_id)
        if scanner is None:
            scanner = self._scanners[partition.partition_id] = self._new_scanner(partition, self._budget)
        return scanner

    def subscribe(self, bucket: int, offset: int, partition_id: int | None = None) -> None:
        """Read ``bucket`` of partition ``partition_id`` from ``offset`` on."""
        if partition_id is None:
            raise InvalidPartitionError(f"{self._info.path} is partitioned: subscribe(bucket, offset, partition_id=...)")
        self.subscribe_partition(partition_id, bucket, offset)

    def subscribe_partition(self, partition_id: int, bucket: int, offset: int) -> None:
        scanner = self._scanners.get(partition_id)
        if scanner is None:
            make = self._lake_only().get(partition_id)
            scanner = self._lake_scanner(partition_id, make) if make else self._scanner(self._partition(partition_id))
        scanner.subscribe(bucket, offset)

    def _lake_scanner(self, partition_id: int, make: MakeLakeScanner) -> LogScanner | LakePartitionScanner:
        if partition_id not in self._scanners:
            self._scanners[partition_id] = make(self._budget)
        return self._scanners[partition_id]

    def subscribe_from_beginning(self, buckets: Iterable[int] | None = None) -> None:
        """Every partition (now and created later) from its earliest offset."""
        self._subscribe_whole(OffsetSpec.earliest(), buckets)

    def subscribe_from_timestamp(self, ms: int, buckets: Iterable[int] | None = None) -> None:
        """Every partition (now and created later) from its first record at or after ``ms``."""
        self._subscribe_whole(OffsetSpec.timestamp(ms), buckets)

    def _subscribe_whole(self, spec: OffsetSpec, buckets: Iterable[int] | None) -> None:
        self._whole = (spec, None if buckets is None else list(buckets))
        for partition in self._metadata.partitions(self._info, refresh=True).values():
            assert partition.partition_id is not None
            self._subscribe_spec(partition.partition_id, lambda p=partition: self._scanner(p), spec, self._whole[1])
        for partition_id, make in self._lake_only().items():
            self._subscribe_spec(partition_id, lambda pid=partition_id, m=make: self._lake_scanner(pid, m), spec, self._whole[1])
        self._discovered_at = time.monotonic()

    def _subscribe_spec(
        self, partition_id: int, scanner: Callable[[], LogScanner | LakePartitionScanner], spec: OffsetSpec, buckets: list[int] | None
    ) -> None:
        try:
            chosen = scanner()
            if spec.type == OffsetType.EARLIEST:
                chosen.subscribe_from_beginning(buckets)
            else:
                chosen.subscribe_from_timestamp(spec.ms, buckets)
        except (PartitionNotExistError, TableNotExistError):
            self._dropped(partition_id, "it was dropped before it was read")
        except LakelogError:
            # Not subscribed (remote storage down, say): forgotten, so the next discovery tries again.
            failed = self._scanners.get(partition_id)
            if failed is not None and not failed.positions():
                self._scanners.pop(partition_id).close()
            raise

    def unsubscribe(self, bucket: int, partition_id: int) -> None:
        scanner = self._scanners.get(partition_id)
        if scanner is not None:
            scanner.unsubscribe(bucket)

    def _discover(self) -> None:
        """Subscribe partitions created since the last look (whole-table subscriptions only), and
        end those dropped since."""
        if self._whole is None or time.monotonic() - self._discovered_at < self._discovery_s:
            return
        self._discovered_at = time.monotonic()
        partitions = {p.partition_id: p for p in self._metadata.partitions(self._info, refresh=True).values()}
        lake_only = self._lake_only()
        for partition_id in [pid for pid in self._scanners if pid not in partitions]:
            if not isinstance(self._scanners[partition_id], LakePartitionScanner):
                self._dropped(partition_id, "it was dropped", lake_only)
        spec, buckets = self._whole
        for partition_id, partition in partitions.items():
            if partition_id not in self._scanners:
                log.info("scanner of %s: new partition %s (id %d) subscribed", self._info.path, partition.partition_name, partition_id)
                self._subscribe_spec(partition_id, lambda p=partition: self._scanner(p), spec, buckets)
        for partition_id, make in lake_only.items():
            if partition_id not in self._scanners:
                log.info("scanner of %s: partition id %d, held by the lake only, subscribed", self._info.path, partition_id)
                self._subscribe_spec(partition_id, lambda pid=partition_id, m=make: self._lake_scanner(pid, m), spec, buckets)

    def _exists(self, partition_id: int) -> bool:
        return any(p.partition_id == partition_id for p in self._metadata.partitions(self._info, refresh=True).values())

    def _dropped(self, partition_id: int, why: str, lake_only: dict[int, MakeLakeScanner] | None = None) -> None:
        """A partition whose log is gone: read on from the lake where its scanner stopped when the
        lake holds it (a lake-enabled table's partition is dropped only then), else end it.
        ``lake_only``: what :meth:`_lake_only` just answered, if the caller asked."""
        make = (self._lake_only() if lake_only is None else lake_only).get(partition_id)
        old = self._scanners.get(partition_id)
        if make is None or old is None:
            self._end(partition_id, why)
            return
        del self._scanners[partition_id]
        positions = old.positions()
        old.close()
        scanner = self._scanners[partition_id] = make(self._budget)
        for bucket, offset in positions.items():
            scanner.subscribe(bucket, offset)
        log.info("scanner of %s: partition id %d was dropped from the log; read on from the lake", self._info.path, partition_id)

    def _end(self, partition_id: int, why: str) -> None:
        scanner = self._scanners.pop(partition_id, None)
        if scanner is not None:
            scanner.close()
        log.info("scanner of %s: partition id %d ends, %s", self._info.path, partition_id, why)

    def records_by_tier(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for scanner in self._scanners.values():
            for tier, count in scanner.records_by_tier().items():
                totals[tier] = totals.get(tier, 0) + count
        return totals

    def positions(self) -> dict[tuple[int, int], int]:
        """Per subscribed ``(partition_id, bucket)``, the next offset a poll returns."""
        return {(pid, bucket): offset for pid, scanner in self._scanners.items() for bucket, offset in scanner.positions().items()}

    # polling

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> ScanRecords:
        """Records of every subscribed partition that arrived within ``timeout_ms``, at most
        ``max_records`` over all of them (default: ``client.scanner.max-poll-records``)."""
        if not self._scanners and self._whole is None:
            raise InvalidRequestError(
                f"poll() on a scanner of {self._info.path} with nothing subscribed: call subscribe_partition(), "
                "subscribe_from_beginning() or subscribe_from_timestamp() first"
            )
        return self._poll(timeout_ms, self._max_poll_records if max_records is None else max_records, discover=True)

    def _poll_to_end(self, timeout_ms: int) -> ScanRecords:
        """A read to the end takes the partitions there were when it began."""
        return self._poll(timeout_ms, self._max_poll_records, discover=False)

    def _poll(self, timeout_ms: int, max_records: int, discover: bool) -> ScanRecords:
        """Rounds over the partitions until one brings records or ``timeout_ms`` passed;
        ``max_records`` (<= 0: no limit) shared evenly by them."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while True:
            if discover:
                self._discover()
            tables: dict[TableBucket, pa.Table] = {}
            high_watermarks: dict[TableBucket, int] = {}
            polled = [(pid, scanner) for pid, scanner in self._scanners.items() if scanner.positions()]
            # Each round starts at another partition: the first polled frees and refills the shared
            # budget first, and takes the first share of max_records.
            self._rounds += 1
            first = self._rounds % len(polled) if polled else 0
            polled = polled[first:] + polled[:first]
            quota = RecordQuota(max_records, len(polled))
            for partition_id, scanner in polled:
                if quota.exhausted:
                    break
                try:
                    records = scanner.poll(timeout_ms=0, max_records=quota.share() or 0)
                except (PartitionNotExistError, TableNotExistError):
                    if self._exists(partition_id):
                        raise
                    self._dropped(partition_id, "it was dropped")
                    continue
                for bucket, table in records.tables_by_bucket.items():
                    tables[bucket] = _with_partition_id(table, partition_id)
                quota.took(len(records))
                high_watermarks.update(records.high_watermarks_by_bucket)
            if tables or time.monotonic() >= deadline:
                return ScanRecords(self._out_schema, tables, high_watermarks, by_partition=True)
            time.sleep(min(ROUND_WAIT_S, IDLE_WAIT_S, max(deadline - time.monotonic(), 0)))

    # reading to the end: every partition's buckets together, so they share the read-ahead budget

    def end_offsets(self) -> dict[tuple[int, int], int]:
        self._discover()
        ends = {
            (partition_id, bucket): end
            for partition_id, scanner in self._scanners.items()
            if scanner.positions()
            for bucket, end in scanner.end_offsets().items()
        }
        if not ends:
            raise InvalidRequestError(f"the scanner of {self._info.path} has no bucket subscribed; call subscribe_from_beginning() first")
        return ends

    def _seek(self, bucket: tuple[int, int], offset: int) -> None:
        partition_id, number = bucket
        scanner = self._scanners.get(partition_id)
        if scanner is not None:
            scanner.subscribe(number, offset)

    def close(self) -> None:
        for scanner in self._scanners.values():
            scanner.close()
        self._scanners.clear()


def _with_partition_id(table: pa.Table, partition_id: int) -> pa.Table:
    return table.append_column(PARTITION_ID_FIELD, constant_array(partition_id, table.num_rows, pa.int64()))

