"""LogScanner: subscribe buckets at offsets or timestamps and poll their records in order."""

from __future__ import annotations

import time
from typing import Any, Iterable, Iterator, Mapping

import pyarrow as pa

from lakelog.config import Configuration
from lakelog.errors import InvalidRequestError, UnknownBucketError
from lakelog.metadata import OffsetSpec, TableInfo
from lakelog.client.admin import Admin
from lakelog.log_source import LogSource
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.tablet_gateway import TabletGateway
from lakelog.client.scanner.log_fetcher import IDLE_WAIT_S, LogFetcher
from lakelog.client.scanner.scan_records import ScanRecord, ScanRecords
from lakelog.record.meta_columns import OFFSET_COLUMN, with_meta_fields

RECEIVE_WAIT_MS = 500
ITERATION_POLL_MS = 1000


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

    def poll(self, timeout_ms: int = 1000) -> ScanRecords:
        """Records that arrived within ``timeout_ms``; empty when none did. Raises
        :class:`InvalidRequestError` when no bucket is subscribed: such a poll could never return anything."""
        if not self._fetcher.positions:
            raise InvalidRequestError(
                f"poll() on a scanner of {self._info.path} with no bucket subscribed: call subscribe(), "
                "subscribe_from_beginning() or subscribe_from_timestamp() first"
            )
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while True:
            self._fetcher.send_fetches()
            fetched = self._fetcher.collect()
            if fetched.tables or time.monotonic() >= deadline:
                tables = self._at_most_max_poll_records(fetched.tables)
                self._fetcher.send_fetches()
                return ScanRecords(self._out_schema, tables, fetched.high_watermarks)
            self._fetcher.wait(min(max(deadline - time.monotonic(), 0), IDLE_WAIT_S))

    def _at_most_max_poll_records(self, tables: dict[int, pa.Table]) -> dict[int, pa.Table]:
        """``client.scanner.max-poll-records`` shared evenly by the buckets that have records, so none
        starves; a bucket cut short is set back to its first record not returned."""
        if self._max_poll_records < 1:
            return tables
        left = self._max_poll_records
        kept: dict[int, pa.Table] = {}
        for index, (bucket, table) in enumerate(sorted(tables.items())):
            share = min(-(-left // (len(tables) - index)), table.num_rows)
            kept[bucket] = table.slice(0, share)
            left -= share
            if share < table.num_rows:
                self._fetcher.seek(bucket, table.column(OFFSET_COLUMN)[share].as_py())
        return kept

    def iterate(self, timeout_ms: int = ITERATION_POLL_MS) -> Iterator[ScanRecord]:
        """Records poll by poll, until a poll of ``timeout_ms`` brings none."""
        while records := self.poll(timeout_ms):
            yield from records

    def __iter__(self) -> Iterator[ScanRecord]:
        """``for record in scanner``: what there is now, ending once a poll of 1 s brings nothing."""
        return self.iterate()

    def poll_arrow(self, timeout_ms: int = 1000) -> pa.Table:
        """Like :meth:`poll`, as one Arrow table with ``__bucket``, ``__offset`` and ``__timestamp``."""
        return self.poll(timeout_ms).to_arrow()

    # reading to the end, for Arrow tools

    def to_arrow(self) -> pa.Table:
        """Every subscribed bucket from its position up to its latest offset taken now, as one table
        (with ``__bucket``, ``__offset`` and ``__timestamp``); records appended later are left for
        the next read. Positions end at those latest offsets."""
        return self.to_arrow_batch_reader().read_all()

    def to_pandas(self) -> Any:
        """:meth:`to_arrow` as a pandas DataFrame (needs pandas)."""
        return self.to_arrow().to_pandas()

    def to_arrow_batch_reader(self) -> pa.RecordBatchReader:
        """Like :meth:`to_arrow`, streamed: each poll's records become batches as the reader is read,
        so a table larger than memory can go to Parquet, DuckDB or polars. The latest offsets are
        taken now, when the reader is made."""
        starts = self.positions()
        if not starts:
            raise InvalidRequestError(
                f"the scanner of {self._info.path} has no bucket subscribed; call subscribe_from_beginning() or subscribe() first"
            )
        latest = self._admin.list_offsets(self._info.path, list(starts), OffsetSpec.latest(), self._info.partition_name or None)
        ends = {bucket: max(start, latest[bucket]) for bucket, start in starts.items()}
        return pa.RecordBatchReader.from_batches(self._out_schema, self._batches_until(ends))

    def _batches_until(self, ends: dict[int, int]) -> Iterator[pa.RecordBatch]:
        """Poll until every bucket reached its end offset; records past an end are not returned, and
        the bucket is set back to its end, so they are not lost to the next poll either."""
        try:
            while any(self._fetcher.positions.get(bucket, end) < end for bucket, end in ends.items()):
                records = self.poll(timeout_ms=RECEIVE_WAIT_MS)
                for bucket in records.buckets():
                    table = records.to_arrow(bucket)
                    keep = ends.get(bucket, 0) - table.column(OFFSET_COLUMN)[0].as_py()
                    if keep > 0:
                        yield from table.slice(0, keep).to_batches()
        finally:
            for bucket, end in ends.items():
                if self._fetcher.positions.get(bucket, end) > end:
                    self._fetcher.seek(bucket, end)

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
