"""The fetcher behind a LogScanner: FetchLogs in flight per tablet server, answers buffered.

Requests go out asynchronously, to every leader at once, and a bucket's next fetch is sent as soon
as an answer with records arrives, at the offset where those records end, while the scanner's
budget has room: the servers read ahead while the caller decodes and processes records. One fetch
per tablet server asks for all its buckets, as Kafka's fetcher does; once a server's answers come
back large (a backlog is being read), its buckets are split between two fetches, each up to half of
``client.scanner.fetch.max-bytes``, so the server reads one answer while the other travels: with
one fetch in flight its reads and the transfers took turns (bench/, the local-tier benchmark: a
fetch took the server's read plus the transfer, 22 ms for 16 MB, half of it the server's). Two may
be in flight without a backlog too, so buckets with records never wait behind a parked long poll
of caught-up ones (they did, up to ``client.scanner.fetch.max-wait``, at a read's end). A bucket
with a fetch in flight is never fetched again, an answer is kept only when it starts exactly
where the bucket's buffered answers end, and one that no longer matches the bucket's position
(re-subscribed meanwhile, or after a failed answer) is dropped, so no record is returned twice.

An answer that points at remote log segments starts a :class:`RemoteLogReader`: the client reads
those segments from remote storage itself, over as many polls as they take, and only then fetches
the bucket from the server again, at the offset where the segments ended. An answer that points
at the lake (only when the table has a LogSource, see :mod:`lakelog.client.lake.lake_sources`)
starts a :class:`LakeLogReader` the same way: the records come from the LogSource, and the bucket
goes back to the server at the lake snapshot's end offset.

All three draw on one :class:`ReadAheadBudget` per user-facing scanner
(``client.scanner.max-buffered-bytes``; a partitioned table's partitions share it): no fetch is sent
while the answers, remote pieces and lake batches held reach it, so a scanner's memory is bounded
per scanner, not per bucket or partition.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Callable, Protocol

import pyarrow as pa

from lakelog.config import Configuration
from lakelog.errors import CorruptRecordError, LakelogError, OffsetOutOfRangeError
from lakelog.metadata import LakeLogFetchInfo, RemoteLogFetchInfo, ServerNode, TableInfo
from lakelog.log_source import FetchContext, LogSource
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.messages import FetchedBucket, FetchRequest
from lakelog.client.rpc.tablet_gateway import TabletGateway
from lakelog.client.scanner.batch_decoder import decode_records
from lakelog.client.scanner.lake_log_reader import LakeLogReader
from lakelog.client.scanner.record_quota import RecordQuota
from lakelog.client.scanner.read_ahead_budget import ReadAheadBudget
from lakelog.client.scanner.remote_log_downloader import RemoteLogDownloader
from lakelog.client.scanner.remote_log_reader import RemoteLogReader
from lakelog.client.table_bucket import TableBucket
from lakelog.record import batch as rb
from lakelog.record.meta_columns import OFFSET_COLUMN, with_meta_fields

log = logging.getLogger(__name__)

# How long a poll with nothing to return sleeps between checks for new answers at most.
IDLE_WAIT_S = 0.2

LOCAL_TIER = "local"
REMOTE_TIER = "remote"
LAKE_TIER = "lake"
# FetchLogs in flight per tablet server at most, over disjoint buckets (see the module's docstring).
FETCHES_PER_SERVER = 2
# An answer of at least this share of client.scanner.fetch.max-bytes says the server has a backlog.
BACKLOG_SHARE = 4


class TierReader(Protocol):
    """A bucket's read from a tier the client reads itself (remote segments, the lake)."""

    tier: str
    next_offset: int
    high_watermark: int

    @property
    def done(self) -> bool: ...

    def ready(self) -> bool: ...

    def read(self, max_bytes: int, max_records: int | None = None) -> pa.Table: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class FetchedBatch:
    """What one round of collecting gives the scanner."""

    tables: dict[TableBucket, pa.Table]
    high_watermarks: dict[TableBucket, int]


class LogFetcher:
    def __init__(
        self,
        info: TableInfo,
        projection: list[int] | None,
        projected_schema: pa.Schema,
        tablets: TabletGateway,
        router: LeaderRouter,
        conf: Configuration,
        budget: ReadAheadBudget,
        log_source: LogSource | None = None,
        remote_conf: Callable[[], Configuration] | None = None,
    ) -> None:
        """``budget``: what answers, remote pieces and lake batches read ahead are held against.
        With a ``log_source`` the fetches set ``enable_lake`` and lake answers are read through it.
        ``remote_conf()`` gives the ``remote.fs.*`` settings (None: ``conf``'s); it is called at the
        first remote read, as it may ask the cluster for them, and most scanners never read remote."""
        self._info = info
        self._projection = projection or []
        self._out_schema = with_meta_fields(projected_schema)
        self._tablets = tablets
        self._router = router
        self._max_bytes = conf.get("client.scanner.fetch.max-bytes")
        self._bucket_bytes = conf.get("client.scanner.fetch.max-bytes-per-bucket")
        self._max_wait_ms = conf.get("client.scanner.fetch.max-wait")
        self._min_bytes = conf.get("client.scanner.fetch.min-bytes")
        self._offset_reset: str = conf.get("client.scanner.offset-reset")
        self.positions: dict[int, int] = {}
        self.records_by_tier: dict[str, int] = {LAKE_TIER: 0, REMOTE_TIER: 0, LOCAL_TIER: 0}
        self._in_flight: set[int] = set()
        # FetchLogs in flight per tablet server, at most FETCHES_PER_SERVER: a fetch per bucket
        # could hold more parked long polls on one connection than its stream limit
        # (server.rpc.max-concurrent-streams), and the server would refuse the connection's next calls.
        self._nodes_in_flight: dict[ServerNode, int] = defaultdict(int)
        # Servers whose last answer was large: their buckets go in FETCHES_PER_SERVER fetches.
        self._backlogged: set[ServerNode] = set()
        # Answers not yet polled, per bucket in offset order, and where the next fetch starts.
        self._completed: dict[int, list[FetchedBucket]] = {}
        # Buckets whose answers a poll has taken out of ``_completed`` and is acting on, the last
        # of them a pointer to another tier or an error: none is fetched again meanwhile. A fetch
        # sent in that window, before a remote or lake answer had started its reader, came back
        # with the same pointer and started a second reader over the first, whose downloads held
        # the budget forever: the scan stopped. A bucket whose answers are records is fetched on
        # while they are decoded (where they end is known): the server reads the next answer then.
        self._taking: set[int] = set()
        self._next_fetch: dict[int, int] = {}
        self._retry_at: dict[int, float] = {}
        self._retries: dict[int, int] = {}
        self._cond = threading.Condition()
        self._log_source = log_source
        self._readers: dict[int, TierReader] = {}
        self._budget = budget
        self._remote_conf = remote_conf or (lambda: conf)
        self._prefetch_num: int = conf.get("client.scanner.remote-log.prefetch-num")
        self._downloader: RemoteLogDownloader | None = None
        self._deferred_error: LakelogError | None = None

    # subscriptions

    def seek(self, bucket: int, offset: int) -> None:
        with self._cond:
            self.positions[bucket] = offset
            self._drop_completed(bucket)
        self._drop_reader(bucket)

    def unsubscribe(self, bucket: int) -> None:
        with self._cond:
            self.positions.pop(bucket, None)
            self._drop_completed(bucket)
        self._drop_reader(bucket)

    def _drop_completed(self, bucket: int) -> None:
        """Forget the bucket's buffered answers: its next fetch starts at its position again."""
        for fetch in self._completed.pop(bucket, ()):
            self._budget.release(len(fetch.records))
        self._next_fetch.pop(bucket, None)

    def remote_read_stats(self) -> dict[str, int]:
        return self._downloader.bytes_read() if self._downloader is not None else {}

    def close(self) -> None:
        for bucket in list(self.positions):
            self.unsubscribe(bucket)
        if self._downloader is not None:
            self._downloader.close()

    # sending

    def send_fetches(self) -> None:
        now = time.monotonic()
        by_leader: dict[ServerNode, list[tuple[int, int]]] = defaultdict(list)
        if not self._budget.has_room(self._max_bytes):
            return  # room for a whole answer: polls free the budget, and each poll sends again
        with self._cond:
            for bucket, position in self.positions.items():
                busy = bucket in self._in_flight or bucket in self._taking or bucket in self._readers or not self._reads_on(bucket)
                if busy or self._retry_at.get(bucket, 0) > now:
                    continue
                offset = self._next_fetch.get(bucket, position)
                try:
                    node = self._router.leader(self._info.physical_id, bucket)
                except LakelogError as error:
                    self._completed.setdefault(bucket, []).append(FetchedBucket(bucket, offset, error=error))
                    continue
                if self._nodes_in_flight[node] < FETCHES_PER_SERVER:
                    by_leader[node].append((bucket, offset))
            # Up to FETCHES_PER_SERVER fetches per server may be in flight whatever its backlog, so
            # buckets with records never wait behind a parked long poll of caught-up ones; only a
            # backlog splits the ready buckets between fetches.
            sends = [
                (node, group, self._max_bytes // self._fetches(node))
                for node, buckets in by_leader.items()
                for group in _split(buckets, min(self._fetches(node), FETCHES_PER_SERVER - self._nodes_in_flight[node]))
            ]
            for node, group, _ in sends:
                self._in_flight.update(bucket for bucket, _ in group)
                self._nodes_in_flight[node] += 1
        for node, group, max_bytes in sends:
            self._send(node, group, max_bytes)

    def _fetches(self, node: ServerNode) -> int:
        """FetchLogs the server's ready buckets are split between (each up to max-bytes divided by them)."""
        return FETCHES_PER_SERVER if node in self._backlogged else 1

    def _send(self, node: ServerNode, group: list[tuple[int, int]], max_bytes: int) -> None:
        request = FetchRequest(
            self._info.table_id,
            group,
            self._projection,
            max_bytes,
            self._bucket_bytes,
            self._max_wait_ms,
            self._min_bytes,
            enable_lake=self._log_source is not None,
            partition_id=self._info.partition_id or 0,
        )

        def on_done(answer: list[FetchedBucket] | LakelogError) -> None:
            if isinstance(answer, LakelogError):
                answer = [FetchedBucket(b, o, error=answer) for b, o in group]
            self._complete(answer, node)

        try:
            self._tablets.fetch_log(node, request, on_done)
        except LakelogError as error:
            on_done(error)

    def _reads_on(self, bucket: int) -> bool:
        """The bucket may be fetched now: nothing buffered, or answers from this tablet server that
        end where the next fetch starts: records, or none (the answer's bytes went to other
        buckets, or the bucket is at its end); an error or a pointer to another tier is polled first."""
        answers = self._completed.get(bucket)
        return not answers or _plain(answers[-1])

    def _complete(self, completed: list[FetchedBucket], node: ServerNode) -> None:
        ends = [_records_end(fetch.records) for fetch in completed]  # header walks, outside the lock
        with self._cond:
            self._nodes_in_flight[node] -= 1
            if sum(len(fetch.records) for fetch in completed) * BACKLOG_SHARE >= self._max_bytes:
                self._backlogged.add(node)
            else:
                self._backlogged.discard(node)
            for fetch, end in zip(completed, ends):
                bucket = fetch.bucket
                self._in_flight.discard(bucket)
                position = self.positions.get(bucket)
                if position is None or self._next_fetch.get(bucket, position) != fetch.fetch_offset:
                    continue  # re-subscribed meanwhile
                answers = self._completed.setdefault(bucket, [])
                if answers and _plain(answers[-1]) and not answers[-1].records:
                    answers.pop()  # an empty answer not polled yet: this one says all it said
                answers.append(fetch)
                self._budget.add(len(fetch.records))
                if end is not None:
                    self._next_fetch[bucket] = end
            self._cond.notify_all()
        self.send_fetches()

    # collecting

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def wait(self, timeout_s: float) -> None:
        with self._cond:
            if not self._completed and not any(reader.ready() for reader in self._readers.values()):
                self._cond.wait(timeout_s)

    def collect(self, max_records: int | None = None) -> FetchedBatch:
        """Decode buffered answers and remote or lake batches read meanwhile, at most ``max_records``
        records (None: all; shared by the buckets that have some, see :class:`RecordQuota`), and
        advance positions over the records returned. What is left stays buffered, undecoded, for
        the next call. An error after some records were taken is raised by the next call, so
        those records are returned and no position moves past records the caller never got."""
        if self._deferred_error is not None:
            error, self._deferred_error = self._deferred_error, None
            raise error
        with self._cond:
            completed, self._completed = self._completed, {}
            buckets = sorted(set(completed) | set(self._readers))
            self._taking.update(bucket for bucket, answers in completed.items() if answers and not _plain(answers[-1]))
        tables: dict[int, pa.Table] = {}
        high_watermarks: dict[int, int] = {}
        quota = RecordQuota(max_records, len(buckets))
        try:
            for bucket in buckets:
                share = quota.share()
                self._take_answers(bucket, completed.get(bucket, []), share, tables, high_watermarks)
                with self._cond:
                    reader = self._readers.get(bucket)
                if reader is not None and (share is None or _rows(tables, bucket) < share):
                    rest = None if share is None else share - _rows(tables, bucket)
                    self._read_tier(bucket, reader, rest, tables, high_watermarks)
                quota.took(_rows(tables, bucket))
        except LakelogError as error:
            if not tables:
                raise
            self._deferred_error = error
        finally:
            with self._cond:
                for bucket, answers in completed.items():
                    if answers:
                        self._completed[bucket] = answers + self._completed.get(bucket, [])
                self._taking.difference_update(completed)
        return FetchedBatch({self._table_bucket(b): t for b, t in tables.items()}, {self._table_bucket(b): hw for b, hw in high_watermarks.items()})

    def _table_bucket(self, bucket: int) -> TableBucket:
        return TableBucket(self._info.table_id, self._info.partition_id, bucket)

    def _take_answers(
        self, bucket: int, answers: list[FetchedBucket], share: int | None, tables: dict[int, pa.Table], high_watermarks: dict[int, int]
    ) -> None:
        """Take the bucket's buffered answers in order, up to ``share`` records (None: all); an
        answer taken in part is put back holding the rest."""
        while answers and (share is None or _rows(tables, bucket) < share):
            fetch = answers.pop(0)
            self._budget.release(len(fetch.records))
            if self.positions.get(bucket) != fetch.fetch_offset or fetch.error is not None:
                self._restart(bucket, answers)
            try:
                rest = self._take(bucket, fetch, None if share is None else share - _rows(tables, bucket), tables, high_watermarks)
            except LakelogError:
                self._restart(bucket, answers)
                raise
            if rest is not None:
                answers.insert(0, rest)
                self._budget.add(len(rest.records))

    def _take(
        self, bucket: int, fetch: FetchedBucket, limit: int | None, tables: dict[int, pa.Table], high_watermarks: dict[int, int]
    ) -> FetchedBucket | None:
        """Act on one answer, unless it no longer starts at the bucket's position; take at most
        ``limit`` of its records (None: all). The answer with the records not taken, if any."""
        if self.positions.get(bucket) != fetch.fetch_offset:
            return None  # re-subscribed, or after an answer that failed: the bucket is fetched again
        if fetch.error is not None:
            self._handle_error(fetch)
            return None
        retried = self._retries.pop(bucket, 0)
        if retried:
            log.info("fetch of %s bucket %d works again after %d retries", self._info.path, bucket, retried)
        high_watermarks[bucket] = fetch.high_watermark
        if fetch.remote is not None:
            self._start_remote(bucket, fetch, fetch.remote)
        elif fetch.lake is not None:
            self._start_lake(bucket, fetch, fetch.lake)
        elif fetch.records:
            table, end = decode_records(fetch.records, bucket, fetch.fetch_offset, self._out_schema, self._where(bucket), limit)
            self._accept(bucket, fetch.fetch_offset, table, tables, LOCAL_TIER)
            if end < len(fetch.records):
                return replace(fetch, fetch_offset=fetch.fetch_offset + table.num_rows, records=memoryview(fetch.records)[end:])
        return None

    def _restart(self, bucket: int, answers: list[FetchedBucket]) -> None:
        """Drop what was read ahead of a bucket (after a failed or stale answer): its next fetch
        starts at its position again, and answers to fetches sent beyond it are dropped as they come."""
        for fetch in answers:
            self._budget.release(len(fetch.records))
        answers.clear()
        with self._cond:
            self._drop_completed(bucket)

    def _accept(self, bucket: int, fetch_offset: int, table: pa.Table, tables: dict[int, pa.Table], tier: str) -> None:
        """Return ``table`` and move the bucket past it, unless the bucket was re-subscribed meanwhile."""
        if not table.num_rows:
            return
        self._check_contiguous(bucket, fetch_offset, table)
        with self._cond:
            if self.positions.get(bucket) != fetch_offset:
                return
            self.positions[bucket] = fetch_offset + table.num_rows
            self.records_by_tier[tier] += table.num_rows
        tables[bucket] = pa.concat_tables([tables[bucket], table]) if bucket in tables else table

    def _start_remote(self, bucket: int, fetch: FetchedBucket, remote: RemoteLogFetchInfo) -> None:
        reader = RemoteLogReader(
            remote,
            fetch.fetch_offset,
            self._remote_downloader(),
            bucket,
            self._out_schema,
            self._projection or None,
            self._where(bucket),
            fetch.high_watermark,
        )
        self._start_reader(bucket, reader)

    def _remote_downloader(self) -> RemoteLogDownloader:
        if self._downloader is None:
            settings = self._remote_conf().with_prefix("remote.fs.")
            self._downloader = RemoteLogDownloader(settings, self._prefetch_num, self._budget, self._wake)
        return self._downloader

    def _start_lake(self, bucket: int, fetch: FetchedBucket, lake: LakeLogFetchInfo) -> None:
        assert self._log_source is not None, "lake answers come only to fetches that enable the lake"
        context = FetchContext(
            fetch.fetch_offset, lake.log_end_offset, self._info.partition_name, bucket, lake.snapshot_id, self._projection or None
        )
        reader = LakeLogReader(
            self._log_source, context, self._out_schema, self._where(bucket), fetch.high_watermark, self._budget, self._wake
        )
        self._start_reader(bucket, reader)

    def _start_reader(self, bucket: int, reader: TierReader) -> None:
        """The bucket reads from ``reader`` now; once it is done, the next fetch starts where the
        reader stopped (the bucket's position), not where the last answer's records ended."""
        with self._cond:
            replaced = self._readers.get(bucket)
            self._readers[bucket] = reader
            self._next_fetch.pop(bucket, None)
        if replaced is not None:  # never left open: what it read ahead would hold the budget for good
            replaced.close()

    def _read_tier(
        self, bucket: int, reader: TierReader, limit: int | None, tables: dict[int, pa.Table], high_watermarks: dict[int, int]
    ) -> None:
        """Take the next remote or lake records of ``bucket``, at most ``limit`` (None: a read's
        worth). A failed read is dropped with the position unchanged, so the next poll asks the
        server again where to continue."""
        high_watermarks[bucket] = reader.high_watermark
        try:
            offset = reader.next_offset
            self._accept(bucket, offset, reader.read(self._bucket_bytes, limit), tables, reader.tier)
        except LakelogError:
            self._drop_reader(bucket)
            raise
        if reader.done:
            self._drop_reader(bucket)

    def _drop_reader(self, bucket: int) -> None:
        with self._cond:
            reader = self._readers.pop(bucket, None)
        if reader is not None:
            reader.close()

    def _where(self, bucket: int) -> str:
        """How errors name a bucket."""
        return f"{self._info.path} bucket {bucket}"

    def _check_contiguous(self, bucket: int, fetch_offset: int, table: pa.Table) -> None:
        offsets = table.column(OFFSET_COLUMN)
        first, last = offsets[0].as_py(), offsets[-1].as_py()
        if first != fetch_offset or last != fetch_offset + table.num_rows - 1:
            raise CorruptRecordError(
                f"{self._where(bucket)}: fetch at offset {fetch_offset} returned offsets "
                f"{first}..{last} for {table.num_rows} records (a gap or an overlap)"
            )

    def _handle_error(self, fetch: FetchedBucket) -> None:
        error = fetch.error
        assert error is not None
        if isinstance(error, OffsetOutOfRangeError):
            if self._offset_reset == "error" or fetch.log_start_offset < 0:
                raise OffsetOutOfRangeError(fetch.bucket, fetch.fetch_offset, fetch.log_start_offset)
            self._reset_offset(fetch)
            return
        attempt = self._retries.get(fetch.bucket, 0)
        delay = self._router.retry_delay_s(error, attempt, resend_safe=True, table_id=self._info.physical_id)
        if delay is None:
            # A storage outage is the caller's to see (and to retry); leader moves and restarts are ours.
            raise error
        if not attempt:
            log.info("fetch of %s bucket %d failed, retrying until it works: %s", self._info.path, fetch.bucket, error)
        self._retries[fetch.bucket] = attempt + 1
        self._retry_at[fetch.bucket] = time.monotonic() + delay

    def _reset_offset(self, fetch: FetchedBucket) -> None:
        """Move a bucket no tier can serve to the earliest readable offset or to the high watermark,
        as ``client.scanner.offset-reset`` says: both come from the same failed answer, so the reset
        is deterministic and costs no extra round trip. Logged once, with the range the consumer
        will never see (or the rewind), because a silent reset would hide lost data."""
        target = fetch.log_start_offset if self._offset_reset == "earliest" else max(fetch.high_watermark, fetch.log_start_offset)
        with self._cond:
            if self.positions.get(fetch.bucket) != fetch.fetch_offset:
                return  # re-subscribed meanwhile: the caller chose a position itself
            self.positions[fetch.bucket] = target
        if target >= fetch.fetch_offset:
            change = f"skipping offsets [{fetch.fetch_offset}, {target})"
        else:
            change = f"rewinding from offset {fetch.fetch_offset} to {target}"
        log.warning(
            "%s bucket %d: offset %d is out of range (offset-reset=%s), %s",
            self._info.path, fetch.bucket, fetch.fetch_offset, self._offset_reset, change,
        )


def _split(buckets: list[tuple[int, int]], fetches: int) -> list[list[tuple[int, int]]]:
    """``buckets`` in at most ``fetches`` fetches of nearly equal size (one per bucket at most)."""
    count = min(fetches, len(buckets))
    return [buckets[i::count] for i in range(count)]


def _rows(tables: dict[int, pa.Table], bucket: int) -> int:
    table = tables.get(bucket)
    return table.num_rows if table is not None else 0


def _plain(fetch: FetchedBucket) -> bool:
    """An answer of records (or none) from the log, nothing to act on before fetching on."""
    return fetch.error is None and fetch.remote is None and fetch.lake is None


def _records_end(records: bytes | memoryview) -> int | None:
    """The offset after the last whole batch in ``records`` (unchecked: a damaged answer fails
    when it is decoded, and what was fetched beyond it is dropped then); None without a batch."""
    end = None
    for _, header in rb.iter_headers(records):
        end = header.next_offset
    return end
