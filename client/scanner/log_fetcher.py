"""The fetcher behind a LogScanner: FetchLogs in flight per tablet server, answers into the buffer.

One fetch per tablet server asks for all the buckets it leads, of every partition the scanner reads,
as Kafka's and Fluss's fetchers do. Requests go out asynchronously, to every leader at once, and a
bucket's next fetch is sent as soon as an answer with records arrives, at the offset where those
records end, while the scanner's budget has room: the servers read ahead while the caller decodes
and processes records. Once a server's answers come back large (a backlog is being read), its
buckets are split between two fetches, each up to half of ``client.scanner.fetch.max-bytes``, so the
server reads one answer while the other travels; two may be in flight without a backlog too. A
server's first fetch is split as well, as a scan most often starts at a backlog: the server reads
both halves at once (a projected scan of the local tier measured 10-20% faster). Those first fetches
never wait on the server for records (max-wait 0), and polls wait for all of them (up to
``OPENING_WAIT_S``), so a small table's first poll still holds every bucket. Buckets that have
caught up (their fetch offset at the high watermark the server last gave) wait for new records in
one long poll per server, beside those fetches and not in their places: however many buckets catch
up, and in whatever order, a bucket with records (a remote or lake read just done, a new
subscription) is fetched at once, never after the server's ``client.scanner.fetch.max-wait`` ends a
poll. A fetch sent anyway carries the caught-up buckets too, as Kafka's fetch carries every
partition.

A bucket with a fetch in flight is never fetched again, an answer is kept only when it starts
exactly where the bucket's buffered answers end, and one that no longer matches the bucket's
position (re-subscribed meanwhile, or after a failed answer) is dropped, so no record is returned
twice.

The fetcher also makes the readers of the tiers the client reads itself: an answer that points
at remote log segments becomes a :class:`RemoteLogReader`, one that points at the lake (only when
the table has a LogSource) a :class:`LakeLogReader`, and a bucket of a partition only the lake
holds is read by a lake reader from the start, opened as the budget's window of readers allows.
All of them draw on one :class:`ReadAheadBudget` per scanner (``client.scanner.max-buffered-bytes``).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Callable

import pyarrow as pa

from lakelog.config import Configuration
from lakelog.errors import LakelogError
from lakelog.log_source import FetchContext, LogSource
from lakelog.cluster_state import ServerNode
from lakelog.metadata import MAX_BUCKETS, TableInfo
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.messages import FetchedBucket, FetchRequest
from lakelog.client.rpc.tablet_gateway import TabletGateway
from lakelog.client.scanner.fetch_buffer import OPENING_WAIT_S, FetchBuffer, TierReader
from lakelog.client.scanner.lake_log_reader import LakeLogReader
from lakelog.client.scanner.remote_log_downloader import RemoteLogDownloader
from lakelog.client.scanner.remote_log_reader import RemoteLogReader
from lakelog.client.table_bucket import TableBucket
from lakelog.record import batch as rb

log = logging.getLogger(__name__)

# FetchLogs in flight per tablet server at most, over disjoint buckets (see the module's docstring):
# a fetch per bucket could hold more parked long polls on one connection than its stream limit
# (server.rpc.max-concurrent-streams), and the server would refuse the connection's next calls.
FETCHES_PER_SERVER = 2
# An answer of at least this share of client.scanner.fetch.max-bytes says the server has a backlog.
BACKLOG_SHARE = 4


class LogFetcher:
    def __init__(
        self,
        info: TableInfo,
        projection: list[int] | None,
        out_schema: pa.Schema,
        buffer: FetchBuffer,
        tablets: TabletGateway,
        router: LeaderRouter,
        conf: Configuration,
        log_source: LogSource | None = None,
        remote_conf: Callable[[], Configuration] | None = None,
    ) -> None:
        """``out_schema``: the projected schema with the meta columns, as readers decode. With a
        ``log_source`` the fetches set ``enable_lake`` and lake answers are read through it.
        ``remote_conf()`` gives the ``remote.fs.*`` settings (None: ``conf``'s); it is called at the
        first remote read, as it may ask the cluster for them, and most scanners never read remote."""
        self._table_id = info.table_id
        self._infos: dict[int | None, TableInfo] = {info.partition_id: info}
        self._projection = projection or []
        self.out_schema = out_schema
        self._buffer = buffer
        self._tablets = tablets
        self._router = router
        self._max_bytes = conf.get("client.scanner.fetch.max-bytes")
        self.bucket_bytes: int = conf.get("client.scanner.fetch.max-bytes-per-bucket")
        self._max_wait_ms = conf.get("client.scanner.fetch.max-wait")
        self._min_bytes = conf.get("client.scanner.fetch.min-bytes")
        self.log_source = log_source
        self._nodes_in_flight: dict[ServerNode, int] = defaultdict(int)  # fetches of buckets with records
        self._polling: set[ServerNode] = set()  # servers holding a long poll of caught-up buckets only
        self._high_watermarks: dict[TableBucket, int] = {}  # what the last answer for each bucket said
        self._turn = 0  # where the next round starts among the positions (see send_fetches)
        self._answered: set[ServerNode] = set()  # servers that answered a fetch of buckets with records
        self._backlogged: set[ServerNode] = set()  # servers whose last answer was large
        self._remote_conf = remote_conf or (lambda: conf)
        self._prefetch_num: int = conf.get("client.scanner.remote-log.prefetch-num")
        self._downloader: RemoteLogDownloader | None = None

    def add_partition(self, info: TableInfo) -> None:
        """A partition whose buckets may be subscribed."""
        self._infos[info.partition_id] = info

    def info(self, bucket: TableBucket) -> TableInfo:
        """The table's, or the bucket's partition's, info."""
        return self._infos[bucket.partition_id]

    def where(self, bucket: TableBucket) -> str:
        """How errors name a bucket."""
        return f"{self.info(bucket).label} bucket {bucket.bucket}"

    # sending

    def send_fetches(self) -> None:
        """One fetch per leader (two when it has a backlog) for every bucket ready to be fetched;
        lake-only buckets get their lake reader instead, as the budget's window allows."""
        if not self._buffer.budget.has_room(self._max_bytes):
            return  # room for a whole answer: polls free the budget, and each poll sends again
        buffer = self._buffer
        by_leader: dict[ServerNode, list[tuple[TableBucket, int]]] = defaultdict(list)
        caught_up: dict[ServerNode, list[tuple[TableBucket, int]]] = defaultdict(list)
        lake_reads: list[TableBucket] = []
        now = time.monotonic()
        with buffer.cond:
            # A FetchLog names at most MAX_BUCKETS buckets: with more ready on one server, the rest go
            # in later fetches, starting where this round stopped so every bucket gets its turn.
            ready = list(buffer.positions.items())
            start = self._turn % len(ready) if ready else 0
            for bucket, position in ready[start:] + ready[:start]:
                if bucket in buffer.in_flight or bucket in buffer.taking or bucket in buffer.readers or not buffer.reads_on(bucket):
                    continue
                if bucket in buffer.lake_only:
                    if position < buffer.lake_only[bucket].end and buffer.budget.try_open_reader():
                        buffer.windowed.add(bucket)
                        lake_reads.append(bucket)
                    continue
                if buffer.retry_at.get(bucket, 0) > now:
                    continue
                offset = buffer.next_fetch.get(bucket, position)
                try:
                    node = self._router.leader(self.info(bucket).physical_id, bucket.bucket)
                except LakelogError as error:
                    buffer.completed.setdefault(bucket, []).append(FetchedBucket(bucket, offset, error=error))
                    continue
                if offset >= self._high_watermarks.get(bucket, offset + 1):
                    if len(caught_up[node]) < MAX_BUCKETS:
                        caught_up[node].append((bucket, offset))
                elif len(by_leader[node]) < MAX_BUCKETS * self._free_fetches(node):
                    by_leader[node].append((bucket, offset))
                    self._turn += 1
            sends = self._plan(by_leader, caught_up)
            for node, group, _, polls, opening in sends:
                buffer.in_flight.update(bucket for bucket, _ in group)
                if opening:
                    buffer.opening += 1
                    buffer.opening_until = now + OPENING_WAIT_S
                if polls:
                    self._polling.add(node)
                else:
                    self._nodes_in_flight[node] += 1
        for bucket in lake_reads:
            self._start_lake_only(bucket)
        for node, group, max_bytes, polls, opening in sends:
            self._send(node, group, max_bytes, polls, opening)

    def _free_fetches(self, node: ServerNode) -> int:
        """Fetches of buckets with records that may go to ``node`` now."""
        return min(self._fetches(node), FETCHES_PER_SERVER - self._nodes_in_flight[node])

    def _plan(
        self, by_leader: dict[ServerNode, list[tuple[TableBucket, int]]], caught_up: dict[ServerNode, list[tuple[TableBucket, int]]]
    ) -> list[tuple[ServerNode, list[tuple[TableBucket, int]], int, bool, bool]]:
        """The fetches to send: (server, buckets, max bytes, whether it is a long poll of caught-up
        buckets only, whether it is one of the server's first fetches). Caught-up buckets ride
        along with a server's fetches of buckets with records while those have room; without such
        a fetch, they go in the server's one long poll."""
        sends = []
        for node in by_leader.keys() | caught_up.keys():
            with_records, idle = by_leader.get(node, []), caught_up.get(node, [])
            if with_records:
                fetches = self._free_fetches(node)
                riding = idle[: MAX_BUCKETS * fetches - len(with_records)]
                max_bytes = self._max_bytes // self._fetches(node)
                opening = node not in self._answered
                sends += [(node, group, max_bytes, False, opening) for group in _split(with_records + riding, fetches)]
            elif idle and node not in self._polling:
                sends.append((node, idle, self._max_bytes // self._fetches(node), True, False))
        return sends

    def _fetches(self, node: ServerNode) -> int:
        """FetchLogs the server's ready buckets are split between (each up to max-bytes divided by them)."""
        return FETCHES_PER_SERVER if node in self._backlogged or node not in self._answered else 1

    def _send(self, node: ServerNode, group: list[tuple[TableBucket, int]], max_bytes: int, polls: bool, opening: bool) -> None:
        """``opening``: one of the server's first fetches, which polls wait for (see FetchBuffer.opening)."""
        request = FetchRequest(
            self._table_id,
            group,
            self._projection,
            max_bytes,
            self.bucket_bytes,
            0 if opening else self._max_wait_ms,
            self._min_bytes,
            enable_lake=self.log_source is not None,
        )

        def on_done(answer: list[FetchedBucket] | LakelogError) -> None:
            if isinstance(answer, LakelogError):
                answer = [FetchedBucket(b, o, error=answer) for b, o in group]
            self._complete(answer, node, polls, opening)

        try:
            self._tablets.fetch_log(node, request, on_done)
        except LakelogError as error:
            on_done(error)

    def _complete(self, completed: list[FetchedBucket], node: ServerNode, polled: bool, opening: bool) -> None:
        """An answer into the buffer, bucket by bucket, where it continues the bucket's answers."""
        ends = [_records_end(fetch.records) for fetch in completed]  # header walks, outside the lock
        buffer = self._buffer
        with buffer.cond:
            buffer.opening -= opening
            if polled:
                self._polling.discard(node)
            else:
                self._nodes_in_flight[node] -= 1
                self._answered.add(node)
            if sum(len(fetch.records) for fetch in completed) * BACKLOG_SHARE >= self._max_bytes:
                self._backlogged.add(node)
            else:
                self._backlogged.discard(node)
            for fetch, end in zip(completed, ends):
                bucket = fetch.bucket
                buffer.in_flight.discard(bucket)
                position = buffer.positions.get(bucket)
                if position is not None and fetch.error is None and fetch.high_watermark >= 0:
                    self._high_watermarks[bucket] = fetch.high_watermark
                else:  # unsubscribed (nothing kept for it), or asked again as a bucket with records
                    self._high_watermarks.pop(bucket, None)
                if position is None or buffer.next_fetch.get(bucket, position) != fetch.fetch_offset:
                    continue  # re-subscribed meanwhile
                answers = buffer.completed.setdefault(bucket, [])
                if answers and _empty(answers[-1]):
                    answers.pop()  # an empty answer not polled yet: this one says all it said
                answers.append(fetch)
                buffer.budget.add(len(fetch.records))
                if end is not None:
                    buffer.next_fetch[bucket] = end
            buffer.notify()
        self.send_fetches()

    # readers of the tiers the client reads itself

    def remote_reader(self, fetch: FetchedBucket) -> TierReader:
        assert fetch.remote is not None
        bucket = fetch.bucket
        return RemoteLogReader(
            fetch.remote,
            fetch.fetch_offset,
            self._remote_downloader(),
            bucket.bucket,
            self.out_schema,
            self._projection or None,
            self.where(bucket),
            fetch.high_watermark,
        )

    def lake_reader(self, bucket: TableBucket, start: int, end: int, snapshot_id: int, high_watermark: int) -> TierReader:
        assert self.log_source is not None, "lake reads come only to scanners with a LogSource"
        context = FetchContext(start, end, self.info(bucket).partition_name, bucket.bucket, snapshot_id, self._projection or None)
        return LakeLogReader(
            self.log_source, context, self.out_schema, self.where(bucket), high_watermark, self._buffer.budget, self._buffer.wakeup
        )

    def _start_lake_only(self, bucket: TableBucket) -> None:
        buffer = self._buffer
        with buffer.cond:
            position, lake = buffer.positions.get(bucket), buffer.lake_only.get(bucket)
        if position is None or lake is None:  # unsubscribed meanwhile
            with buffer.cond:
                buffer.windowed.discard(bucket)
            buffer.budget.reader_closed()
            return
        self.start_reader(bucket, self.lake_reader(bucket, position, lake.end, lake.snapshot_id, lake.end))

    def start_reader(self, bucket: TableBucket, reader: TierReader) -> None:
        """The bucket reads from ``reader`` now; once it is done, the next fetch starts where the
        reader stopped (the bucket's position), not where the last answer's records ended."""
        with self._buffer.cond:
            replaced = self._buffer.readers.get(bucket)
            self._buffer.readers[bucket] = reader
            self._buffer.next_fetch.pop(bucket, None)
        if replaced is not None:  # never left open: what it read ahead would hold the budget for good
            replaced.close()

    def _remote_downloader(self) -> RemoteLogDownloader:
        if self._downloader is None:
            settings = self._remote_conf().with_prefix("remote.fs.")
            self._downloader = RemoteLogDownloader(settings, self._prefetch_num, self._buffer.budget, self._buffer.wakeup)
        return self._downloader

    def remote_read_stats(self) -> dict[str, int]:
        return self._downloader.bytes_read() if self._downloader is not None else {}

    def close(self) -> None:
        if self._downloader is not None:
            self._downloader.close()


def _split(buckets: list[tuple[TableBucket, int]], fetches: int) -> list[list[tuple[TableBucket, int]]]:
    """``buckets`` in at most ``fetches`` fetches of nearly equal size (one per bucket at most)."""
    count = min(fetches, len(buckets))
    return [buckets[i::count] for i in range(count)]


def _empty(fetch: FetchedBucket) -> bool:
    return fetch.error is None and fetch.remote is None and fetch.lake is None and not fetch.records


def _records_end(records: bytes | memoryview) -> int | None:
    """The offset after the last whole batch in ``records`` (unchecked: a damaged answer fails
    when it is decoded, and what was fetched beyond it is dropped then); None without a batch."""
    end = None
    for _, header in rb.iter_headers(records):
        end = header.next_offset
    return end
