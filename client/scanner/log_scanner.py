"""LogScanner: subscribe buckets at offsets or timestamps and poll their records in order."""

from __future__ import annotations

import time
from typing import Callable, Iterable, Mapping

import pyarrow as pa

from lakelog.config import Configuration
from lakelog.errors import InvalidRequestError, UnknownBucketError
from lakelog.metadata import OffsetSpec, TableInfo
from lakelog.client.admin import Admin
from lakelog.log_source import LogSource
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.tablet_gateway import TabletGateway
from lakelog.client.scanner.log_fetcher import IDLE_WAIT_S, LogFetcher
from lakelog.client.scanner.polled_scanner import PolledScanner
from lakelog.client.scanner.read_ahead_budget import ReadAheadBudget
from lakelog.client.scanner.scan_records import ScanRecords
from lakelog.record.meta_columns import with_meta_fields


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
        budget: ReadAheadBudget | None = None,
        remote_conf: Callable[[], Configuration] | None = None,
    ) -> None:
        """``log_source`` reads the offsets only the lake holds (None: a scanner without the lake);
        ``budget`` is what it reads ahead against (None: one of its own of
        ``client.scanner.max-buffered-bytes``; a partitioned table's scanner shares one);
        ``remote_conf()``, called at the first remote read, gives the ``remote.fs.*`` settings (None: ``conf``'s)."""
        self._info = info
        self._admin = admin
        fields = [info.schema.field(i) for i in projection] if projection else list(info.schema)
        self.schema = pa.schema(fields)
        self._out_schema = with_meta_fields(self.schema)
        budget = budget or ReadAheadBudget(conf.get("client.scanner.max-buffered-bytes"))
        self._fetcher = LogFetcher(info, projection, self.schema, tablets, router, conf, budget, log_source, remote_conf)
        self._max_poll_records: int = conf.get("client.scanner.max-poll-records")

    # subscriptions

    def _buckets(self, buckets: Iterable[int] | None) -> list[int]:
        chosen = list(range(self._info.buckets)) if buckets is None else list(buckets)
        for bucket in chosen:
            if not 0 <= bucket < self._info.buckets:
                raise UnknownBucketError(
                    f"{self._info.path} has no bucket {bucket} (it has buckets 0..{self._info.buckets - 1})"
                )
        return chosen

    def subscribe(self, bucket: int, offset: int) -> None:
        """Read ``bucket`` from ``offset`` on (the next offset to return)."""
        self._buckets([bucket])
        if offset < 0:
            raise InvalidRequestError(f"cannot subscribe {self._info.path} bucket {bucket} at negative offset {offset}")
        self._fetcher.seek(bucket, offset)

    def subscribe_from_beginning(self, buckets: Iterable[int] | None = None) -> None:
        self._subscribe_spec(OffsetSpec.earliest(), buckets)

    def subscribe_from_timestamp(self, ms: int, buckets: Iterable[int] | None = None) -> None:
        """Start each bucket at its first record whose commit timestamp is >= ``ms``."""
        self._subscribe_spec(OffsetSpec.timestamp(ms), buckets)

    def _subscribe_spec(self, spec: OffsetSpec, buckets: Iterable[int] | None) -> None:
        chosen = self._buckets(buckets)
        for bucket, offset in self._admin.list_offsets(self._info.path, chosen, spec, self._info.partition_name or None).items():
            self._fetcher.seek(bucket, offset)

    def subscribe_buckets(self, offsets: Mapping[int, int]) -> None:
        """Read each bucket from its offset: what :meth:`positions` returned, to resume a checkpoint."""
        for bucket, offset in offsets.items():
            self.subscribe(bucket, offset)

    def seek_to_end(self, buckets: Iterable[int] | None = None) -> None:
        """Subscribe ``buckets`` (default: all) at their latest offsets: only records appended from now on."""
        self._subscribe_spec(OffsetSpec.latest(), buckets)

    def unsubscribe(self, bucket: int) -> None:
        self._fetcher.unsubscribe(bucket)

    def records_by_tier(self) -> dict[str, int]:
        """How many records each tier (lake, remote, local) has served this scanner so far."""
        return dict(self._fetcher.records_by_tier)

    def positions(self) -> dict[int, int]:
        """Per subscribed bucket, the next offset a poll returns: what a consumer checkpoints."""
        return dict(self._fetcher.positions)

    # polling

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> ScanRecords:
        """Records that arrived within ``timeout_ms``, empty when none did; at most ``max_records``
        (default: ``client.scanner.max-poll-records``; <= 0: no limit), shared evenly by the
        buckets that have some, the rest kept read ahead (undecoded) for the next poll. Raises
        :class:`InvalidRequestError` when no bucket is subscribed: such a poll could never return anything."""
        if not self._fetcher.positions:
            raise InvalidRequestError(
                f"poll() on a scanner of {self._info.path} with no bucket subscribed: call subscribe(), "
                "subscribe_from_beginning() or subscribe_from_timestamp() first"
            )
        limit = self._max_poll_records if max_records is None else max_records
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while True:
            self._fetcher.send_fetches()
            fetched = self._fetcher.collect(limit if limit > 0 else None)
            if fetched.tables or time.monotonic() >= deadline:
                self._fetcher.send_fetches()
                return ScanRecords(self._out_schema, fetched.tables, fetched.high_watermarks)
            self._fetcher.wait(min(max(deadline - time.monotonic(), 0), IDLE_WAIT_S))

    # reading to the end, for Arrow tools

    def end_offsets(self) -> dict[int, int]:
        starts = self.positions()
        if not starts:
            raise InvalidRequestError(
                f"the scanner of {self._info.path} has no bucket subscribed; call subscribe_from_beginning() or subscribe() first"
            )
        latest = self._admin.list_offsets(self._info.path, list(starts), OffsetSpec.latest(), self._info.partition_name or None)
        return {bucket: max(start, latest[bucket]) for bucket, start in starts.items()}

    def _seek(self, bucket: int, offset: int) -> None:
        self._fetcher.seek(bucket, offset)

    def remote_read_stats(self) -> dict[str, int]:
        """Bytes this scanner read from remote storage, per remote log segment id: what a caller
        checks to see that remote reads start at the fetched batch, not at the segment's start."""
        return self._fetcher.remote_read_stats()

    def close(self) -> None:
        """Unsubscribe everything, stop remote downloads and lake reads, delete their temp files."""
        self._fetcher.close()
