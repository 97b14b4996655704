"""LogScanner: subscribe buckets at offsets or timestamps and poll their records in order.

One scanner type for every table. A scanner of a table reads its buckets; of one partition (a
partition's handle) that partition's buckets; of a partitioned table every partition's, keyed
``(partition_id, bucket)`` in positions and in what a poll returns, every record carrying its
``partition_id`` and the columnar form a ``__partition_id`` column. Whatever the partitions, one
:class:`LogFetcher` sends one fetch per tablet server for all the buckets it leads, one
:class:`FetchBuffer` holds what came back (local answers, remote and lake reads alike, in order per
bucket) and one :class:`FetchCollector` hands records out under the poll's caps: a poll waits for
the buffer, never in rounds over partitions.

:meth:`subscribe_from_beginning` and :meth:`subscribe_from_timestamp` on a partitioned table take
every partition there is and, every ``client.scanner.partition-discovery.interval``, every
partition created since. A partition that is dropped ends its subscriptions, logged once. A
lake-enabled table's partition is dropped from the log only once the lake holds it, and stays
listed as lake-only: a whole-table subscription reads it from the lake (no server holds it), and a
scanner that was reading its log when it was dropped reads on from the lake where it stopped.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterable, Mapping

import pyarrow as pa

from lakelog.config import Configuration
from lakelog.errors import (
    InvalidPartitionError,
    InvalidRequestError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    PartitionNotExistError,
    UnknownBucketError,
)
from lakelog.metadata import LakeSnapshot, OffsetSpec, OffsetType, TableInfo
from lakelog.client.admin import Admin, lake_offset
from lakelog.log_source import LogSource
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.tablet_gateway import TabletGateway
from lakelog.client.scanner.fetch_buffer import FetchBuffer, LakeOnlyRange
from lakelog.client.scanner.fetch_collector import FetchCollector
from lakelog.client.scanner.log_fetcher import LogFetcher
from lakelog.client.scanner.polled_scanner import PolledScanner
from lakelog.client.scanner.read_ahead_budget import ReadAheadBudget
from lakelog.client.scanner.scan_records import ScanRecords
from lakelog.client.table_bucket import TableBucket
from lakelog.record.meta_columns import PARTITION_ID_FIELD, with_meta_fields

log = logging.getLogger(__name__)

# The longest a poll waits on the buffer before it looks at its deadline (and for new partitions) again.
IDLE_WAIT_S = 0.2


class LogScanner(PolledScanner):
    def __init__(
        self,
        info: TableInfo,
        projection: list[int] | None,
        tablets: TabletGateway,
        router: LeaderRouter,
        admin: Admin,
        conf: Configuration,
        log_source: LogSource | None = None,
        remote_conf: Callable[[], Configuration] | None = None,
        lake_only: Callable[[], dict[int, TableInfo]] | None = None,
        lake_snapshot: Callable[[], LakeSnapshot] | None = None,
    ) -> None:
        """``log_source`` reads the offsets only the lake holds (None: a scanner without the lake);
        ``remote_conf()``, called at the first remote read, gives the ``remote.fs.*`` settings (None:
        ``conf``'s). A partitioned table's scanner: ``lake_only()`` gives the partitions only the lake
        holds (by id), ``lake_snapshot()`` the lake snapshot that holds them, asked once per look
        at the lake-only partitions (a partition dropped since needs a newer one)."""
        self._info = info
        self._admin = admin
        self._metadata = router.metadata
        self._partitioned = info.partitioned and info.partition_id is None
        fields = [info.schema.field(i) for i in projection] if projection else list(info.schema)
        self.schema = pa.schema(fields)
        decoded = with_meta_fields(self.schema)
        self._out_schema = decoded.append(PARTITION_ID_FIELD) if self._partitioned else decoded
        self._buffer = FetchBuffer(ReadAheadBudget(conf.get("client.scanner.max-buffered-bytes")))
        self._fetcher = LogFetcher(info, projection, decoded, self._buffer, tablets, router, conf, log_source, remote_conf)
        self._collector = FetchCollector(self._buffer, self._fetcher, router, conf, self._partitioned)
        self._max_poll_records: int = conf.get("client.scanner.max-poll-records")
        self._log_source = log_source
        self._list_lake_only = lake_only if log_source is not None and lake_only is not None else dict
        self._ask_lake_snapshot = lake_snapshot
        self._snapshot: LakeSnapshot | None = None
        # Partitions subscribed: read from the log, or only from the lake.
        self._partitions: dict[int, TableInfo] = {}
        self._lake_partitions: dict[int, TableInfo] = {}
        # subscribe_from_beginning/timestamp of a partitioned table: what every discovered partition starts with
        self._whole: tuple[OffsetSpec, list[int] | None] | None = None
        self._discovery_s = conf.get("client.scanner.partition-discovery.interval") / 1000
        self._discovered_at = float("-inf")

    # subscriptions

    def _buckets(self, buckets: Iterable[int] | None) -> list[int]:
        chosen = list(range(self._info.buckets)) if buckets is None else list(buckets)
        for bucket in chosen:
            if not 0 <= bucket < self._info.buckets:
                raise UnknownBucketError(f"{self._info.path} has no bucket {bucket} (it has buckets 0..{self._info.buckets - 1})")
        return chosen

    def subscribe(self, bucket: int, offset: int, partition_id: int | None = None) -> None:
        """Read ``bucket`` (of partition ``partition_id``, on a partitioned table) from ``offset`` on
        (the next offset to return)."""
        if self._partitioned:
            if partition_id is None:
                raise InvalidPartitionError(f"{self._info.path} is partitioned: subscribe(bucket, offset, partition_id=...)")
            self.subscribe_partition(partition_id, bucket, offset)
            return
        self._buckets([bucket])
        if offset < 0:
            raise InvalidRequestError(f"cannot subscribe {self._info.path} bucket {bucket} at negative offset {offset}")
        self._seek_bucket(self._table_bucket(self._info, bucket), offset)

    def subscribe_partition(self, partition_id: int, bucket: int, offset: int) -> None:
        """Read ``bucket`` of partition ``partition_id`` from ``offset`` on."""
        if not self._partitioned:
            raise InvalidPartitionError(f"the scanner of {self._info.label} does not read a partitioned table's partitions")
        self._buckets([bucket])
        lake = self._lake_partitions.get(partition_id)
        if lake is None and partition_id not in self._partitions:
            lake = self._lake_only().get(partition_id)
        if lake is not None:
            self._lake_partitions[partition_id] = lake
            self._subscribe_lake(lake, bucket, offset)
            return
        info = self._partition(partition_id)
        self._seek_bucket(self._table_bucket(info, bucket), offset)

    def subscribe_from_beginning(self, buckets: Iterable[int] | None = None) -> None:
        """Every bucket (of every partition, now and created later) from its earliest offset."""
        self._subscribe_spec(OffsetSpec.earliest(), buckets)

    def subscribe_from_timestamp(self, ms: int, buckets: Iterable[int] | None = None) -> None:
        """Start each bucket (of every partition, now and created later) at its first record whose
        commit timestamp is >= ``ms``."""
        self._subscribe_spec(OffsetSpec.timestamp(ms), buckets)

    def subscribe_buckets(self, offsets: Mapping[int, int]) -> None:
        """Read each bucket from its offset: what :meth:`positions` returned, to resume a checkpoint."""
        for key, offset in offsets.items():
            self._seek(key, offset)

    def seek_to_end(self, buckets: Iterable[int] | None = None) -> None:
        """Subscribe ``buckets`` (default: all) at their latest offsets: only records appended from now on."""
        self._subscribe_spec(OffsetSpec.latest(), buckets)

    def unsubscribe(self, bucket: int, partition_id: int | None = None) -> None:
        table_id = self._info.table_id
        partition = partition_id if self._partitioned else self._info.partition_id
        self._drop(TableBucket(table_id, partition, bucket))

    def _subscribe_spec(self, spec: OffsetSpec, buckets: Iterable[int] | None) -> None:
        chosen = self._buckets(buckets)
        if not self._partitioned:
            self._subscribe_log(self._info, spec, chosen)
            return
        self._whole = (spec, chosen)
        self._subscribe_partitions(list(self._metadata.partitions(self._info, refresh=True).values()), spec, chosen)
        for partition in self._lake_only().values():
            self._subscribe_lake_partition(partition, spec, chosen)
        self._discovered_at = time.monotonic()

    def _subscribe_partitions(self, partitions: list[TableInfo], spec: OffsetSpec, buckets: list[int]) -> None:
        """Subscribe partitions read from the log, their offsets listed together: a table of 30
        partitions subscribes in one lookup per leader, not 30."""
        listed = self._admin.list_partitions_offsets(partitions, buckets, spec)
        for partition in partitions:
            assert partition.partition_id is not None
            offsets = listed[partition.partition_id]
            if offsets is None:
                self._dropped(partition.partition_id, "it was dropped before it was read")
                continue
            for bucket, offset in offsets.items():
                self._seek_bucket(self._table_bucket(partition, bucket), offset)

    def _subscribe_lake_partition(self, partition: TableInfo, spec: OffsetSpec, buckets: list[int]) -> None:
        assert partition.partition_id is not None
        self._lake_partitions[partition.partition_id] = partition
        for bucket in buckets:
            self._subscribe_lake(partition, bucket, self._lake_start(partition, bucket, spec))

    def _subscribe_log(self, info: TableInfo, spec: OffsetSpec, buckets: list[int]) -> None:
        for bucket, offset in self._admin.list_offsets(info.path, buckets, spec, info.partition_name or None).items():
            self._seek_bucket(self._table_bucket(info, bucket), offset)

    def _seek_bucket(self, bucket: TableBucket, offset: int, lake: LakeOnlyRange | None = None) -> None:
        with self._buffer.cond:
            replaced = self._buffer.seek(bucket, offset, lake)
        if replaced is not None:
            replaced.close()

    def _drop(self, bucket: TableBucket) -> None:
        with self._buffer.cond:
            replaced = self._buffer.unsubscribe(bucket)
        if replaced is not None:
            replaced.close()

    def _table_bucket(self, info: TableInfo, bucket: int) -> TableBucket:
        if info.partition_id is not None and self._partitioned and info.partition_id not in self._partitions:
            self._partitions[info.partition_id] = info
            self._fetcher.add_partition(info)
        return TableBucket(info.table_id, info.partition_id, bucket)

    def _seek(self, key: object, offset: int) -> None:
        """Subscribe the bucket a public key names (a number, or ``(partition_id, bucket)``)."""
        if isinstance(key, tuple):
            partition_id, bucket = key
            self.subscribe(bucket, offset, partition_id)
        else:
            assert isinstance(key, int)
            self.subscribe(key, offset)

    def _partition(self, partition_id: int) -> TableInfo:
        known = self._partitions.get(partition_id)
        if known is not None:
            return known
        for refresh in (False, True):
            for partition in self._metadata.partitions(self._info, refresh=refresh).values():
                if partition.partition_id == partition_id:
                    return partition
        raise PartitionNotExistError(f"{self._info.path} has no partition with id {partition_id}")

    # lake-only partitions

    def _lake_only(self) -> dict[int, TableInfo]:
        """The partitions only the lake holds now; the lake snapshot is asked again when needed."""
        self._snapshot = None
        return self._list_lake_only()

    def _lake_snapshot(self) -> LakeSnapshot:
        if self._snapshot is None:
            assert self._ask_lake_snapshot is not None, "lake-only partitions come with their lake snapshot"
            self._snapshot = self._ask_lake_snapshot()
        return self._snapshot

    def _lake_range(self, partition: TableInfo, bucket: int) -> tuple[int, int]:
        held = self._lake_snapshot().bucket_offsets.get((partition.partition_id, bucket))
        return (held.log_start_offset, held.log_end_offset) if held else (0, 0)

    def _lake_start(self, partition: TableInfo, bucket: int, spec: OffsetSpec) -> int:
        start, end = self._lake_range(partition, bucket)
        if spec.type == OffsetType.EARLIEST:
            return start
        if spec.type == OffsetType.LATEST or end <= start:
            return end
        assert self._log_source is not None
        try:
            return lake_offset(self._log_source, partition, bucket, spec.ms, self._lake_snapshot().snapshot_id)
        except InvalidTimestampError:
            return end

    def _subscribe_lake(self, partition: TableInfo, bucket: int, offset: int) -> None:
        start, end = self._lake_range(partition, bucket)
        if not start <= offset <= end:
            raise OffsetOutOfRangeError(
                bucket, offset, start, f"{partition.label} is held by the lake only: bucket {bucket} has offsets [{start}, {end}), not {offset}"
            )
        table_bucket = TableBucket(partition.table_id, partition.partition_id, bucket)
        self._fetcher.add_partition(partition)
        self._seek_bucket(table_bucket, offset, LakeOnlyRange(end, self._lake_snapshot().snapshot_id))

    def _discover(self) -> None:
        if self.discovery_due():
            self.discover()

    def discover(self) -> None:
        """Subscribe partitions created since the last look (whole-table subscriptions only), and
        end those dropped since."""
        if self._whole is None:
            return
        self._discovered_at = time.monotonic()
        partitions = {p.partition_id: p for p in self._metadata.partitions(self._info, refresh=True).values()}
        lake_only = self._lake_only()
        for partition_id in [pid for pid in self._partitions if pid not in partitions]:
            self._dropped(partition_id, "it was dropped", lake_only)
        spec, buckets = self._whole
        created = [partition for partition_id, partition in partitions.items() if partition_id not in self._partitions]
        for partition in created:
            log.info("scanner of %s: new partition %s (id %d) subscribed", self._info.path, partition.partition_name, partition.partition_id)
        self._subscribe_partitions(created, spec, buckets)
        for partition_id, partition in lake_only.items():
            if partition_id not in self._lake_partitions and partition_id not in self._partitions:
                log.info("scanner of %s: partition id %d, held by the lake only, subscribed", self._info.path, partition_id)
                self._subscribe_lake_partition(partition, spec, buckets)

    def _dropped(self, partition_id: int, why: str, lake_only: dict[int, TableInfo] | None = None) -> None:
        """A partition whose log is gone: read on from the lake where the scan stopped when the
        lake holds it (a lake-enabled table's partition is dropped only then), else end it.
        ``lake_only``: what :meth:`_lake_only` just answered, if the caller asked."""
        lake = (self._lake_only() if lake_only is None else lake_only).get(partition_id)
        self._partitions.pop(partition_id, None)
        with self._buffer.cond:
            positions = {b: o for b, o in self._buffer.positions.items() if b.partition_id == partition_id}
        for bucket in positions:
            self._drop(bucket)
        if lake is None or not positions:
            log.info("scanner of %s: partition id %d ends, %s", self._info.path, partition_id, why)
            return
        self._lake_partitions[partition_id] = lake
        for bucket, offset in positions.items():
            self._subscribe_lake(lake, bucket.bucket, offset)
        log.info("scanner of %s: partition id %d was dropped from the log; read on from the lake", self._info.path, partition_id)

    def _handle_gone(self) -> None:
        """Partitions the servers answered as gone: ended, or read on from the lake; one that
        still exists (or a partition's own handle) raises what the server said."""
        with self._buffer.cond:
            gone, self._buffer.gone = self._buffer.gone, {}
        for partition_id, error in gone.items():
            if not self._partitioned or self._exists(partition_id):
                raise error
            self._dropped(partition_id, "it was dropped")

    def _exists(self, partition_id: int) -> bool:
        return any(p.partition_id == partition_id for p in self._metadata.partitions(self._info, refresh=True).values())

    # state

    def records_by_tier(self) -> dict[str, int]:
        """How many records each tier (lake, remote, local) has served this scanner so far."""
        with self._buffer.cond:
            return dict(self._buffer.records_by_tier)

    def assignment(self) -> set[Any]:
        """The buckets this scanner reads (keyed as :meth:`positions`): those it subscribed, or
        in a group those the group gives it now."""
        return set(self.positions())

    def commit(self) -> None:
        """Only a consumer group's scanner commits (``create_log_scanner(group=...)``); any other
        checkpoints :meth:`positions` itself."""
        raise InvalidRequestError(f"the scanner of {self._info.path} is in no group: it has nothing to commit to; checkpoint positions() instead")

    def positions(self) -> dict[Any, int]:
        """Per subscribed bucket (its number, or ``(partition_id, bucket)``), the next offset a
        poll returns: what a consumer checkpoints."""
        with self._buffer.cond:
            return {bucket.public_key(self._partitioned): offset for bucket, offset in self._buffer.positions.items()}

    # polling

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> ScanRecords:
        """Records that arrived within ``timeout_ms``, empty when none did; at most ``max_records``
        (default: ``client.scanner.max-poll-records``; <= 0: no limit), shared evenly by the
        buckets that have some, the rest kept read ahead (undecoded) for the next poll. Raises
        :class:`InvalidRequestError` when nothing is subscribed: such a poll could never return anything."""
        self.check_subscribed()
        return self._poll(timeout_ms, self._max_poll_records if max_records is None else max_records, discover=True)

    def _poll_to_end(self, timeout_ms: int) -> ScanRecords:
        """A read to the end takes the partitions there were when it began."""
        return self._poll(timeout_ms, self._max_poll_records, discover=False)

    def _poll(self, timeout_ms: int, limit: int, discover: bool) -> ScanRecords:
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while True:
            if discover:
                self._discover()
            records = self.collect(limit)
            if records or time.monotonic() >= deadline:
                return records
            self._buffer.wait(min(max(deadline - time.monotonic(), 0), IDLE_WAIT_S))

    def check_subscribed(self) -> None:
        if not self._buffer.positions and self._whole is None:
            raise InvalidRequestError(
                f"poll() on a scanner of {self._info.path} with no bucket subscribed: call subscribe(), "
                "subscribe_from_beginning() or subscribe_from_timestamp() first"
            )

    def discovery_due(self) -> bool:
        """Partitions are to be looked for (a whole partitioned table, its interval passed)."""
        return self._whole is not None and time.monotonic() - self._discovered_at >= self._discovery_s

    def collect(self, limit: int) -> ScanRecords:
        """One look at the buffer, without waiting: send the fetches due, take what is there (at
        most ``limit`` records; <= 0: no limit), and fetch on for what was taken."""
        self._fetcher.send_fetches()
        collected = self._collector.collect(limit if limit > 0 else None)
        self._handle_gone()
        if collected.tables:
            self._fetcher.send_fetches()
        return ScanRecords(self._out_schema, collected.tables, collected.high_watermarks, self._partitioned)

    @property
    def buffer(self) -> FetchBuffer:
        """What the scanner's fetches fill (an asyncio scanner listens to it)."""
        return self._buffer

    @property
    def max_poll_records(self) -> int:
        return self._max_poll_records

    # reading to the end, for Arrow tools

    def end_offsets(self) -> dict[Any, int]:
        """Per subscribed bucket (keyed as :meth:`positions`), where a read to the end stops."""
        if self._partitioned:
            self._discover()
        with self._buffer.cond:
            starts = dict(self._buffer.positions)
            lake_ends = {bucket: lake.end for bucket, lake in self._buffer.lake_only.items()}
        if not starts:
            raise InvalidRequestError(
                f"the scanner of {self._info.path} has no bucket subscribed; call subscribe_from_beginning() or subscribe() first"
            )
        ends: dict[TableBucket, int] = {}
        by_partition: dict[int | None, list[TableBucket]] = {}
        for bucket in starts:
            if bucket in lake_ends:
                ends[bucket] = lake_ends[bucket]
            else:
                by_partition.setdefault(bucket.partition_id, []).append(bucket)
        for partition_id, buckets in by_partition.items():
            info = self._fetcher.info(buckets[0])
            latest = self._admin.list_offsets(info.path, [b.bucket for b in buckets], OffsetSpec.latest(), info.partition_name or None)
            ends.update({bucket: latest[bucket.bucket] for bucket in buckets})
        return {bucket.public_key(self._partitioned): max(starts[bucket], end) for bucket, end in ends.items()}

    def remote_read_stats(self) -> dict[str, int]:
        """Bytes this scanner read from remote storage, per remote log segment id: what a caller
        checks to see that remote reads start at the fetched batch, not at the segment's start."""
        return self._fetcher.remote_read_stats()

    def close(self) -> None:
        """Unsubscribe everything: stop every bucket's remote downloads and lake reader and free the
        memory their read-ahead holds (remote segments are read into memory, never to files), and
        cancel queued GETs."""
        with self._buffer.cond:
            buckets = list(self._buffer.positions)
        for bucket in buckets:
            self._drop(bucket)
        self._fetcher.close()
