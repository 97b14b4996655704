"""What a scanner reads ahead of its polls, mostly seen from the server's side: one
``client.scanner.max-buffered-bytes`` bounds a partitioned scanner over all its partitions (bytes
fetched, and lake reads open at once), ``client.scanner.max-poll-records`` returns fewer records
per poll without fetching any twice, and a bucket that read remote segments fetches on from where
they ended."""

from __future__ import annotations

import dataclasses
import threading
import time
import types
from typing import Callable, Iterator

import pyarrow as pa

import lakelog
from lakelog.client.rpc.messages import FetchRequest
from lakelog.client.scanner.log_fetcher import FETCHES_PER_SERVER
from lakelog.client.scanner.log_scanner import LogScanner
from lakelog.client.scanner.read_ahead_budget import READER_BYTES
from lakelog.config import Configuration
from lakelog.log_source import FetchContext, LogSource, LookupContext
from lakelog.metadata import LakeBucketOffset, LakeSnapshot, TableInfo
from lakelog.record.meta_columns import with_meta_fields
from lakelog.server.server_process import ServerProcess
from tests.harness.tables import create_table, order_rows, scan_all

PATH = lakelog.TablePath("shop", "days")
SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("note", pa.string())])


def _sent_bytes(server: ServerProcess) -> float:
    """Record bytes the server has sent in FetchLog answers."""
    return server.metrics.registry.get_sample_value("lakelog_fetch_bytes_total", {"tier": "local"}) or 0.0


def _produced_bytes(server: ServerProcess) -> float:
    """Record bytes appended to the server's logs, over every table and partition."""
    return sum(
        sample.value
        for metric in server.metrics.registry.collect()
        for sample in metric.samples
        if sample.name == "lakelog_produce_bytes_total"
    )


def _settled_sent_bytes(server: ServerProcess) -> float:
    """What the server has sent once the client's read-ahead stopped (nothing more for 1 s)."""
    sent = -1.0
    while sent != (sent := _sent_bytes(server)):
        time.sleep(1)
    return sent


def test_a_partitioned_scanner_reads_ahead_within_one_budget(server_factory: Callable[..., ServerProcess]) -> None:
    """Six partitions, each with far more than the budget: after one poll, what the server sent
    stays within one budget plus two answers per partition (the first poll's and one in flight
    when the budget filled), not a budget per partition."""
    server = server_factory()
    partitions, rows, budget, answer = 6, 6000, 128 << 10, 32 << 10
    config = {
        "client.scanner.max-buffered-bytes": str(budget),
        "client.scanner.fetch.max-bytes": str(answer),
        "client.scanner.fetch.max-bytes-per-bucket": str(answer),
    }
    with lakelog.connect(server.address, config) as conn:
        conn.admin.create_database("shop", ignore_if_exists=True)
        conn.admin.create_table(PATH, lakelog.TableDescriptor(SCHEMA, 1, {}, partition_keys=["dt"]))
        table = conn.get_table(PATH)
        with table.new_append().create_writer() as writer:
            for start in range(0, rows, 100):  # batches far smaller than an answer
                for day in range(partitions):
                    ids = pa.array(range(day * rows + start, day * rows + start + 100), pa.int64())
                    notes = pa.array([f"note {i:08d} " * 4 for i in range(100)])
                    writer.append_arrow(pa.table([ids, pa.array([f"d{day}"] * 100), notes], schema=SCHEMA))
                writer.flush()
        assert _produced_bytes(server) > 2 * partitions * (budget + answer)  # each partition could fill a budget of its own
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            first = scanner.poll(timeout_ms=5000)
            assert first
            sent = _settled_sent_bytes(server)
            assert sent <= budget + 2 * partitions * answer, f"{sent:.0f} bytes sent to one scanner of budget {budget}"
            polls = [first]
            while sum(len(p) for p in polls) < partitions * rows:
                polls.append(scanner.poll(timeout_ms=5000))
                assert polls[-1], "a poll brought nothing"
        ids = sorted(record.row["id"] for poll in polls for record in poll)
        assert ids == list(range(partitions * rows))


def test_max_poll_records_returns_less_and_fetches_nothing_twice(server: ServerProcess) -> None:
    """Polls of 100 records over a log of 20000: the read-ahead beyond each poll is kept for the
    next, so the server sends the log about once, not once per poll."""
    with lakelog.connect(server.address, {"client.scanner.max-poll-records": "100"}) as conn:
        table = create_table(conn, buckets=2)
        with table.new_append().create_writer() as writer:
            for start in range(0, 20_000, 2000):
                writer.append_arrow(order_rows(start, 2000))
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            polls = []
            while sum(len(p) for p in polls) < 20_000:
                polls.append(scanner.poll(timeout_ms=5000))
                assert 0 < len(polls[-1]) <= 100
                assert len(polls) <= 200
        # The first polls may come before the answer of the server's other fetch (a server's buckets
        # are split between two); from the first poll with both buckets on, both have records buffered.
        both = next(i for i, p in enumerate(polls) if len(set(p.buckets())) == 2)
        assert all(len(set(p.buckets())) == 2 for p in polls[both : both + 50]), "each poll shares its records by the buckets"
        ids = sorted(record.row["id"] for poll in polls for record in poll)
        assert ids == list(range(20_000))
        assert _sent_bytes(server) < 1.2 * _produced_bytes(server)


def test_after_remote_segments_the_next_fetch_starts_where_they_ended(server_factory: Callable[..., ServerProcess], tmp_path) -> None:
    """An answer read ahead from the local log, then the local log trimmed past it: the bucket
    reads the remote segments, then fetches on at their end, never again at an offset it already
    read (each fetch offset is new)."""
    server = server_factory(**{"log.segment.max-bytes": "64kb", "remote.log.task-interval": "1h", "remote.data.dir": (tmp_path / "remote").as_uri()})
    answer = 32 << 10
    config = {
        "client.scanner.max-buffered-bytes": str(answer),
        "client.scanner.fetch.max-bytes": str(answer),
        "client.scanner.fetch.max-bytes-per-bucket": str(answer),
    }
    with lakelog.connect(server.address, config) as conn:
        table = create_table(conn)
        with table.new_append().create_writer() as writer:
            for start in range(0, 20_000, 500):
                writer.append_arrow(order_rows(start, 500))
                writer.flush()
        fetched: list[int] = []
        send = conn._tablets.fetch_log

        def recording(node: object, request: FetchRequest, on_done: Callable[..., None]) -> None:
            fetched.extend(offset for _, offset in request.buckets)
            send(node, request, on_done)

        conn._tablets.fetch_log = recording  # type: ignore[method-assign]
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe(0, 0)
            first = scanner.poll(timeout_ms=5000)
            _settled_sent_bytes(server)  # the next answer arrived: read ahead, it fills the budget
            assert server.tablet is not None
            report = server.tablet.remote.run_once()
            assert report.uploaded >= 4 and report.deleted_local >= 2
            local_start = conn.admin.describe_buckets(table.path)[0].local_log_start_offset
            rest = scan_all(scanner, 20_000 - len(first))
        assert [r.offset for r in first] + rest.column("__offset").to_pylist() == list(range(20_000))
        assert scanner.records_by_tier()["remote"] > 0 and local_start > fetched[2]
        below_end = [offset for offset in fetched if offset < 20_000]
        assert len(below_end) == len(set(below_end)), f"offsets fetched twice: {sorted(below_end)}"


class _CountingLake(LogSource):
    """A lake of each bucket's offsets in batches of 10 rows (more than a reader queues, so a read
    stays open until it is consumed), counting the reads open at once."""

    def __init__(self) -> None:
        self.open = self.most = 0
        self._lock = threading.Lock()

    def lookup_log_offset_by_timestamp(self, context: LookupContext) -> int:
        raise NotImplementedError

    def fetch_log_records(self, context: FetchContext) -> Iterator[pa.RecordBatch]:
        with self._lock:
            self.open += 1
            self.most = max(self.most, self.open)
        try:
            for start in range(context.fetch_start_offset, context.log_end_offset_of_snapshot, 10):
                count = min(10, context.log_end_offset_of_snapshot - start)
                offsets = list(range(start, start + count))
                columns = {"id": offsets, "dt": [context.partition_name] * count, "__bucket": [context.bucket] * count}
                yield pa.RecordBatch.from_pydict({**columns, "__offset": offsets, "__timestamp": [7] * count}, schema=LAKE_SCHEMA)
        finally:
            with self._lock:
                self.open -= 1


LAKE_SCHEMA = with_meta_fields(SCHEMA.remove(2))
ROWS = 5000


def test_lake_only_partitions_open_lake_reads_a_window_at_a_time() -> None:
    """Two lake-only partitions of four buckets each, in one scanner whose budget allows two
    readers: never more than two lake reads are open at once, and every record comes once, in
    order. No server holds such partitions: the scanner needs no gateway, router or admin."""
    lake = _CountingLake()
    info = TableInfo(1, PATH, SCHEMA.remove(2), 0, 4, {}, partition_keys=("dt",))
    snapshot = LakeSnapshot(9, {(pid, bucket): LakeBucketOffset(0, ROWS) for pid in (5, 6) for bucket in range(4)})
    partitions = {pid: dataclasses.replace(info, partition_id=pid, partition_name=f"d{pid}") for pid in (5, 6)}
    conf = Configuration({"client.scanner.max-buffered-bytes": str(2 * READER_BYTES)})
    router = types.SimpleNamespace(metadata=None)
    scanner = LogScanner(info, None, None, router, None, conf, lake, None, lambda: partitions, lambda: snapshot)  # type: ignore[arg-type]
    for pid in partitions:
        for bucket in range(4):
            scanner.subscribe_partition(pid, bucket, 0)
    got: dict[tuple[int, int], list[int]] = {}
    deadline = time.monotonic() + 60
    while scanner.positions() != {(pid, bucket): ROWS for pid in (5, 6) for bucket in range(4)}:
        assert time.monotonic() < deadline, scanner.positions()
        records = scanner.poll(timeout_ms=10)
        for key in records.buckets():
            got.setdefault(key, []).extend(records.to_arrow(key).column("__offset").to_pylist())
    scanner.close()
    assert got == {(pid, bucket): list(range(ROWS)) for pid in (5, 6) for bucket in range(4)}
    assert lake.most == 2


def test_a_caught_up_scanner_parks_two_polls_per_server_and_the_connection_keeps_answering(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """120 buckets on one server, read to their end: the scanner's long polls wait as two fetches
    for the server (FETCHES_PER_SERVER), not one per bucket (which took more streams than the connection allows,
    ``server.rpc.max-concurrent-streams`` = 100, and the server refused the connection's next calls)."""
    server = server_factory()
    registry = server.metrics.registry
    # Answers of a few buckets each: buckets reach their end at different polls.
    config = {"client.scanner.fetch.max-wait": "5s", "client.scanner.fetch.max-bytes": "4kb", "client.scanner.fetch.max-bytes-per-bucket": "1kb"}
    with lakelog.connect(server.address, config) as conn:
        table = create_table(conn, buckets=120)
        with table.new_append().create_writer() as writer:
            for bucket in range(120):
                writer.append_arrow(order_rows(bucket * 10, 10), bucket=bucket)
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            assert scan_all(scanner, 1200).num_rows == 1200
            for _ in range(20):  # polls at the end: each may send the buckets it polled again
                assert scanner.poll_arrow(timeout_ms=10).num_rows == 0
            assert registry.get_sample_value("lakelog_fetch_parked_polls") <= FETCHES_PER_SERVER
            for _ in range(200):  # the same connection, while the scanner's poll is parked
                assert conn.admin.list_offsets(table.path)[119] == 10


def test_buckets_subscribed_while_a_poll_is_parked_are_fetched_without_waiting_for_it(server: ServerProcess) -> None:
    """A caught-up scanner keeps one long poll parked per server; buckets it subscribes to meanwhile
    must be fetched in a fetch of their own, not after that poll's max-wait (30 s here)."""
    with lakelog.connect(server.address, {"client.scanner.fetch.max-wait": "30s"}) as conn:
        table = create_table(conn, buckets=4)
        with table.new_append().create_writer() as writer:
            for bucket in (2, 3):
                writer.append_arrow(order_rows(bucket * 100, 100), bucket=bucket)
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe(0, 0)
            scanner.subscribe(1, 0)
            assert scanner.poll_arrow(timeout_ms=300).num_rows == 0  # buckets 0 and 1 are empty: their poll parks
            scanner.subscribe(2, 0)
            scanner.subscribe(3, 0)
            got = []
            for _ in range(4):  # each poll waits 5 s at most: well short of the parked poll's 30 s
                got.append(scanner.poll_arrow(timeout_ms=5_000))
                if sum(polled.num_rows for polled in got) >= 200:
                    break
    ids = sorted(pa.concat_tables(got).column("id").to_pylist())
    assert ids == [*range(200, 300), *range(300, 400)]
