"""The scanner's fetcher, buffer and collector against a fake tablet gateway (no server): a
leader's first FetchLogs carry every partition's buckets, a leader move mid-fetch goes to the new
leader, a bucket goes from the lake back to the log in order (a tier change mid-bucket), a poll
that ends with a fetch in flight loses nothing and a re-subscription drops the stale answer, and a
partition created while scanning is read."""

from __future__ import annotations

import dataclasses
import threading
from typing import Callable, Iterable, Iterator

import pyarrow as pa
import pytest

from lakelog.config import Configuration
from lakelog.errors import LakelogError, NotLeaderError
from lakelog.log_source import FetchContext, LogSource, LookupContext
from lakelog.cluster_state import ServerNode
from lakelog.fetch_info import LakeLogFetchInfo
from lakelog.metadata import MAX_BUCKETS, OffsetSpec, TableInfo, TablePath
from lakelog.record import batch as rb
from lakelog.record.meta_columns import with_meta_fields
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.messages import FetchedBucket, FetchRequest
from lakelog.client.rpc.retry_policy import RetryPolicy
from lakelog.client.scanner import log_fetcher
from lakelog.client.scanner.log_fetcher import FETCHES_PER_SERVER
from lakelog.client.scanner.log_scanner import LogScanner
from lakelog.client.table_bucket import TableBucket

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64())])
TABLE = TableInfo(7, TablePath("shop", "events"), SCHEMA, 1, 2, {})
PARTITIONED = dataclasses.replace(TABLE, partition_keys=("dt",))
NODE_A = ServerNode(1, "a", 1)
NODE_B = ServerNode(2, "b", 2)
CONF = {"client.scanner.partition-discovery.interval": "1ms"}


def partition(partition_id: int) -> TableInfo:
    return dataclasses.replace(PARTITIONED, partition_id=partition_id, partition_name=f"p{partition_id}")


class FakeCluster:
    """Tablet servers, coordinator and admin in one: per bucket log (ids equal offsets), leaders by
    bucket number, partitions by name. A fetch is answered at once when one of its buckets has
    records (or a prepared answer), else parked until something is appended, as a long poll."""

    def __init__(self, partitions: Iterable[TableInfo] = ()) -> None:
        self.leaders = {0: NODE_A, 1: NODE_A}
        self.logs: dict[tuple[int | None, int], int] = {}
        self.partition_infos = {p.partition_name: p for p in partitions}
        self.sent: list[tuple[ServerNode, FetchRequest]] = []
        self.prepared: dict[tuple[ServerNode, int | None, int], FetchedBucket | LakelogError] = {}
        self.hold = False
        self._parked: list[tuple[ServerNode, FetchRequest, Callable[..., None]]] = []
        self._lock = threading.Lock()
        self.metadata = self

    # coordinator and admin

    def leader(self, physical_id: int, bucket: int) -> ServerNode:
        return self.leaders[bucket]

    def refresh(self, table_id: int) -> None:
        """Leaders here are always current."""

    def partitions(self, info: TableInfo, refresh: bool = False) -> dict[str, TableInfo]:
        return dict(self.partition_infos)

    def list_offsets(self, path: TablePath, buckets: list[int], spec: OffsetSpec, partition_name: str | None) -> dict[int, int]:
        return {bucket: 0 for bucket in buckets}

    def list_partitions_offsets(self, partitions: list[TableInfo], buckets: list[int], spec: OffsetSpec) -> dict[int, dict[int, int] | None]:
        return {p.partition_id: {bucket: 0 for bucket in buckets} for p in partitions if p.partition_id is not None}

    # the tablet servers

    def append(self, partition_id: int | None, bucket: int, count: int) -> None:
        with self._lock:
            self.logs[partition_id, bucket] = self.logs.get((partition_id, bucket), 0) + count
            parked, self._parked = self._parked, []
        for node, request, on_done in parked:
            self.fetch_log(node, request, on_done)

    def answer_oldest_parked(self, server: ServerNode | None = None) -> None:
        """The oldest parked fetch (to ``server``) answered alone, as if the others' answers were
        still on their way."""
        with self._lock:
            index = next(i for i, (node, _, _) in enumerate(self._parked) if server in (None, node))
            node, request, on_done = self._parked.pop(index)
            answers = [self._answer(node, bucket, offset) for bucket, offset in request.buckets]
        on_done(answers)

    def release(self) -> None:
        self.hold = False
        self.append(None, 0, 0)

    def fetch_log(self, node: ServerNode, request: FetchRequest, on_done: Callable[..., None]) -> None:
        with self._lock:
            self.sent.append((node, request))
            ready = not self.hold and any(
                self.logs.get((b.partition_id, b.bucket), 0) > offset or (node, b.partition_id, b.bucket) in self.prepared
                for b, offset in request.buckets
            )
            if not ready:
                self._parked.append((node, request, on_done))
                return
            answers = [self._answer(node, bucket, offset) for bucket, offset in request.buckets]
        on_done(answers)

    def _answer(self, node: ServerNode, bucket: TableBucket, offset: int) -> FetchedBucket:
        prepared = self.prepared.pop((node, bucket.partition_id, bucket.bucket), None)
        if isinstance(prepared, LakelogError):
            return FetchedBucket(bucket, offset, error=prepared)
        if prepared is not None:
            return dataclasses.replace(prepared, bucket=bucket, fetch_offset=offset)
        end = self.logs.get((bucket.partition_id, bucket.bucket), 0)
        if end <= offset:
            return FetchedBucket(bucket, offset, high_watermark=end)
        day = f"p{bucket.partition_id}"
        rows = pa.record_batch({"dt": [day] * (end - offset), "id": list(range(offset, end))}, schema=SCHEMA)
        return FetchedBucket(bucket, offset, rb.encode_batch(rows, 1, base_offset=offset, commit_timestamp=5), high_watermark=end)

    def fetched_buckets(self) -> list[set[tuple[int | None, int]]]:
        with self._lock:
            return [{(b.partition_id, b.bucket) for b, _ in request.buckets} for _, request in self.sent]


class LakeOfTen(LogSource):
    """A lake holding offsets [0, 10) of every bucket."""

    def lookup_log_offset_by_timestamp(self, context: LookupContext) -> int:
        raise NotImplementedError

    def fetch_log_records(self, context: FetchContext) -> Iterator[pa.RecordBatch]:
        offsets = list(range(context.fetch_start_offset, context.log_end_offset_of_snapshot))
        columns = {"dt": [f"p{context.partition_name}"] * len(offsets), "id": offsets, "__bucket": [context.bucket] * len(offsets)}
        yield pa.RecordBatch.from_pydict({**columns, "__offset": offsets, "__timestamp": [5] * len(offsets)}, schema=with_meta_fields(SCHEMA))


def scanner(cluster: FakeCluster, info: TableInfo, source: LogSource | None = None) -> LogScanner:
    router = LeaderRouter(cluster, RetryPolicy(0.01, 0.02), 5.0)  # type: ignore[arg-type]
    return LogScanner(info, None, cluster, router, cluster, Configuration(CONF), source, lake_only=dict)  # type: ignore[arg-type]


def read(scan: LogScanner, expected: int) -> dict[object, list[int]]:
    """Each bucket's ids, in the order polls returned them, until ``expected`` records came."""
    got: dict[object, list[int]] = {}
    for _ in range(200):
        if sum(map(len, got.values())) >= expected:
            return got
        records = scan.poll(timeout_ms=50)
        for key in records.buckets():
            got.setdefault(key, []).extend(records.to_arrow(key).column("id").to_pylist())
    raise AssertionError(f"only {got} arrived")


def test_a_leaders_first_fetches_carry_every_partitions_buckets() -> None:
    """Split in two (FETCHES_PER_SERVER), as a scan most often starts at a backlog; each carries
    both partitions' buckets, as one fetcher reads every partition."""
    cluster = FakeCluster([partition(1), partition(2)])
    for pid in (1, 2):
        for bucket in (0, 1):
            cluster.append(pid, bucket, 3)
    cluster.hold = True
    scan = scanner(cluster, PARTITIONED)
    scan.subscribe_from_beginning()
    assert not scan.poll(timeout_ms=0)
    first = cluster.fetched_buckets()
    assert len(first) == FETCHES_PER_SERVER
    assert set().union(*first) == {(1, 0), (1, 1), (2, 0), (2, 1)}, "the first fetches ask for all four buckets"
    assert all({pid for pid, _ in fetch} == {1, 2} for fetch in first), "each carries both partitions"
    cluster.release()
    assert read(scan, 12) == {(pid, bucket): [0, 1, 2] for pid in (1, 2) for bucket in (0, 1)}
    assert scan.positions() == {(pid, bucket): 3 for pid in (1, 2) for bucket in (0, 1)}
    scan.close()


def test_the_first_poll_waits_for_both_first_fetches_so_it_holds_every_bucket() -> None:
    cluster = FakeCluster()
    cluster.append(None, 0, 2)
    cluster.append(None, 1, 3)
    cluster.hold = True
    scan = scanner(cluster, TABLE)
    scan.subscribe_from_beginning()
    assert not scan.poll(timeout_ms=0)
    assert [request.max_wait_ms for _, request in cluster.sent] == [0, 0], "first fetches never park on the server"
    cluster.answer_oldest_parked()
    assert not scan.poll(timeout_ms=20), "one answer of the two is held back"
    cluster.hold = False
    cluster.answer_oldest_parked()
    records = scan.poll(timeout_ms=1000)
    assert sorted(records.buckets()) == [0, 1] and len(records) == 5
    cluster.append(None, 0, 1)
    assert read(scan, 1) == {0: [2]}
    assert cluster.sent[-1][1].max_wait_ms == Configuration(CONF).get("client.scanner.fetch.max-wait")
    scan.close()


def test_a_server_that_never_answers_its_first_fetch_holds_the_others_records_back_only_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(log_fetcher, "OPENING_WAIT_S", 0.05)
    cluster = FakeCluster()
    cluster.append(None, 0, 2)
    cluster.append(None, 1, 3)
    cluster.leaders[1] = NODE_B
    cluster.hold = True
    scan = scanner(cluster, TABLE)
    scan.subscribe_from_beginning()
    assert not scan.poll(timeout_ms=0)
    cluster.answer_oldest_parked(NODE_A)  # server B never answers
    assert read(scan, 2) == {0: [0, 1]}
    scan.close()


def test_a_leader_move_mid_fetch_goes_to_the_new_leader() -> None:
    cluster = FakeCluster()
    cluster.append(None, 0, 4)
    cluster.prepared[NODE_A, None, 0] = NotLeaderError("bucket 0 moved")
    scan = scanner(cluster, TABLE)
    scan.subscribe(0, 0)
    assert not scan.poll(timeout_ms=0), "the first leader answers that it is not the leader any more"
    cluster.leaders[0] = NODE_B
    assert read(scan, 4) == {0: [0, 1, 2, 3]}
    assert [node for node, _ in cluster.sent][:2] == [NODE_A, NODE_B]
    scan.close()


def test_a_bucket_read_from_the_lake_goes_back_to_the_log_in_order() -> None:
    """The server answers offset 0 with a lake pointer up to 10; the log holds 10..14."""
    cluster = FakeCluster()
    cluster.append(None, 0, 15)
    lake_answer = FetchedBucket(TableBucket(7, None, 0), 0, high_watermark=15, lake=LakeLogFetchInfo(9, 10))
    cluster.prepared[NODE_A, None, 0] = lake_answer
    scan = scanner(cluster, TABLE, LakeOfTen())
    scan.subscribe(0, 0)
    assert read(scan, 15) == {0: list(range(15))}
    assert scan.records_by_tier() == {"lake": 10, "remote": 0, "local": 5}
    assert [offset for _, request in cluster.sent for _, offset in request.buckets][:2] == [0, 10]
    scan.close()


def test_a_poll_that_ends_with_a_fetch_in_flight_loses_nothing_and_a_resubscribed_bucket_drops_the_stale_answer() -> None:
    cluster = FakeCluster()
    cluster.append(None, 0, 5)
    cluster.append(None, 1, 5)
    cluster.hold = True  # the servers answer nothing yet
    scan = scanner(cluster, TABLE)
    scan.subscribe_from_beginning()
    assert not scan.poll(timeout_ms=0), "a poll that ends before the answer"
    scan.subscribe(1, 3)  # re-subscribed while its fetch (at 0) is in flight
    cluster.release()
    got = read(scan, 7)
    assert got == {0: [0, 1, 2, 3, 4], 1: [3, 4]}, "bucket 1 from 3 only: the answer for offset 0 was dropped"
    assert not scan.poll(timeout_ms=0)
    scan.close()


def test_a_partition_created_while_scanning_is_read() -> None:
    cluster = FakeCluster([partition(1)])
    cluster.append(1, 0, 2)
    scan = scanner(cluster, PARTITIONED)
    scan.subscribe_from_beginning(buckets=[0])
    assert read(scan, 2) == {(1, 0): [0, 1]}
    cluster.partition_infos["p2"] = partition(2)
    cluster.append(2, 0, 3)
    assert read(scan, 3) == {(2, 0): [0, 1, 2]}
    records = scan.poll(timeout_ms=0)
    assert not records
    assert scan.positions() == {(1, 0): 2, (2, 0): 3}
    scan.close()


@pytest.mark.parametrize("info", [TABLE, PARTITIONED], ids=["table", "partitioned"])
def test_polls_without_a_subscription_are_refused(info: TableInfo) -> None:
    with pytest.raises(LakelogError, match="no bucket subscribed"):
        scanner(FakeCluster(), info).poll(timeout_ms=0)


def test_a_server_leading_more_buckets_than_a_fetch_may_name_gets_several_fetches_and_every_bucket_is_read() -> None:
    """A FetchLog names at most MAX_BUCKETS buckets (tablet servers refuse more): 600 partitions of
    two buckets on one server are read through fetches within that bound, every bucket in turn."""
    partitions = [partition(pid) for pid in range(1, 601)]
    cluster = FakeCluster(partitions)
    for pid in range(1, 601):
        for bucket in (0, 1):
            cluster.append(pid, bucket, 1)
    scan = scanner(cluster, PARTITIONED)
    scan.subscribe_from_beginning()
    assert read(scan, 1200) == {(pid, bucket): [0] for pid in range(1, 601) for bucket in (0, 1)}
    assert max(len(fetched) for fetched in cluster.fetched_buckets()) <= MAX_BUCKETS
    scan.close()


def test_caught_up_buckets_parked_in_long_polls_never_hold_back_a_bucket_with_records() -> None:
    """Buckets that caught up at different times each wait in a long poll; a bucket whose records
    come later (its remote or lake read done, or a subscription) is fetched at once, not after
    the server's fetch.max-wait ends one of those polls."""
    cluster = FakeCluster()
    cluster.leaders[2] = NODE_A
    scan = scanner(cluster, dataclasses.replace(TABLE, buckets=3))
    for bucket in (0, 1):  # each read to its end, its next fetch a long poll of its own
        cluster.append(None, bucket, 2)
        scan.subscribe(bucket, 0)
        assert read(scan, 2) == {bucket: [0, 1]}
    cluster.append(None, 2, 3)
    scan.subscribe(2, 0)

    records = scan.poll(timeout_ms=2000)

    assert records.to_arrow(2).column("id").to_pylist() == [0, 1, 2]
    parked = [request for _, request in cluster.sent if all(cluster.logs.get((None, b.bucket), 0) <= o for b, o in request.buckets)]
    assert parked, "the caught-up buckets did wait in a long poll"
    scan.close()
