"""LogScanner: subscribe buckets at offsets or timestamps and poll their records in order."""

from __future__ import annotations

import time
from typing import Iterable

import pyarrow as pa

from lakelog.config import Configuration
from lakelog.errors import InvalidRequestError, UnknownBucketError
from lakelog.metadata import OffsetSpec, TableInfo
from lakelog.client.admin import Admin
from lakelog.log_source import LogSource
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.tablet_gateway import TabletGateway
from lakelog.client.scanner.log_fetcher import IDLE_WAIT_S, LogFetcher
from lakelog.client.scanner.scan_records import ScanRecords
from lakelog.record.meta_columns import with_meta_fields


class LogScanner:
    def __init__(
        self,
        info: TableInfo,
        projection: list[int] | None,
        tablets: TabletGateway,
        router: LeaderRouter,
        admin: Admin,
        conf: Configuration,
        log_source: LogSource | None = None,
    ) -> None:
        """``log_source`` reads the offsets only the lake holds (None: a scanner without the lake)."""
        self._info = info
        self._admin = admin
        fields = [info.schema.field(i) for i in projection] if projection else list(info.schema)
        self.schema = pa.schema(fields)
        self._out_schema = with_meta_fields(self.schema)
        self._fetcher = LogFetcher(info, projection, self.schema, tablets, router, conf, log_source)

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
        for bucket, offset in self._admin.list_offsets(self._info.path, chosen, spec).items():
            self._fetcher.seek(bucket, offset)

    def unsubscribe(self, bucket: int) -> None:
        self._fetcher.unsubscribe(bucket)

    def records_by_tier(self) -> dict[str, int]:
        """How many records each tier (lake, remote, local) has served this scanner so far."""
        return dict(self._fetcher.records_by_tier)

    def positions(self) -> dict[int, int]:
        """Per subscribed bucket, the next offset a poll returns: what a consumer checkpoints."""
        return dict(self._fetcher.positions)

    # polling

    def poll(self, timeout_ms: int = 1000) -> ScanRecords:
        """Records that arrived within ``timeout_ms``; empty when none did."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while True:
            self._fetcher.send_fetches()
            fetched = self._fetcher.collect()
            if fetched.tables or time.monotonic() >= deadline:
                self._fetcher.send_fetches()
                return ScanRecords(self._out_schema, fetched.tables, fetched.high_watermarks)
            self._fetcher.wait(min(max(deadline - time.monotonic(), 0), IDLE_WAIT_S))

    def poll_arrow(self, timeout_ms: int = 1000) -> pa.Table:
        """Like :meth:`poll`, as one Arrow table with ``__bucket``, ``__offset`` and ``__timestamp``."""
        return self.poll(timeout_ms).to_arrow()

    def remote_read_stats(self) -> dict[str, int]:
        """Bytes this scanner read from remote storage, per remote log segment id: what a caller
        checks to see that remote reads start at the fetched batch, not at the segment's start."""
        return self._fetcher.remote_read_stats()

    def close(self) -> None:
        """Unsubscribe everything, stop remote downloads and lake reads, delete their temp files."""
        self._fetcher.close()

    def __enter__(self) -> "LogScanner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
