"""The connection's sender and a writer's accumulator against a fake tablet gateway (no server):
ready batches of many partitions go to their leader in one ProduceLog, requests in flight per
server are bounded, each bucket's sequence holds across requests, a leader move mid-flight resends
the same batches to the new leader, a report that raises is raised from flush(), a closed
connection fails what a writer held, and with acks=0 a batch is delivered once its request leaves."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import pyarrow as pa
import pytest

from lakelog.config import Configuration
from lakelog.errors import InvalidRequestError, LakelogError, NetworkError, NotLeaderError, OutOfOrderSequenceError
from lakelog.cluster_state import ServerNode
from lakelog.metadata import TablePath, TableInfo
from lakelog.record import batch as rb
from lakelog.security.writer_tokens import WriterIdentity
from lakelog.client.delivery import Delivery
from lakelog.client.record_accumulator import AppendAck, BucketQueue, RecordAccumulator
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.messages import ProducedBatch, ProduceRequest
from lakelog.client.rpc.retry_policy import RetryPolicy
from lakelog.client.sender import Sender
from lakelog.client.writer import AppendWriter
from tests.harness.waiting import wait_until

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64())])
TABLE = TableInfo(7, TablePath("shop", "events"), SCHEMA, 1, 2, {}, partition_keys=("dt",))
NODE_A = ServerNode(1, "a", 1)
NODE_B = ServerNode(2, "b", 2)
WRITER_ID = 42


def partition(partition_id: int) -> TableInfo:
    return dataclasses.replace(TABLE, partition_id=partition_id, partition_name=f"p{partition_id}")


@dataclass
class Sent:
    node: ServerNode
    request: ProduceRequest
    on_done: Callable[[list[ProducedBatch | LakelogError] | LakelogError], None]

    def keys(self) -> list[tuple[int, int]]:
        return [(b.partition_id, b.bucket) for b in self.request.buckets]


class FakeTablets:
    """Records every ProduceLog; answers it when told to (or at once, once ``auto`` is set), each
    bucket's batches appended to a log of its own."""

    timeout_s = 5.0
    closed = False

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.logs: dict[tuple[int, int], list[bytes]] = {}
        self.auto = False
        self._lock = threading.Lock()

    def produce_log(self, node: ServerNode, produce: ProduceRequest, on_done: Callable[..., None]) -> None:
        with self._lock:
            self.sent.append(Sent(node, produce, on_done))
        if self.auto:
            self.answer(self.sent[-1])

    def to(self, node: ServerNode) -> list[Sent]:
        with self._lock:
            return [sent for sent in self.sent if sent.node == node]

    def answer(self, sent: Sent, errors: dict[tuple[int, int], LakelogError] | None = None) -> None:
        answers: list[ProducedBatch | LakelogError] = []
        for item in sent.request.buckets:
            key = (item.partition_id, item.bucket)
            if errors and key in errors:
                answers.append(errors[key])
                continue
            log = self.logs.setdefault(key, [])
            base = sum(rb.read_header(batch).record_count for batch in log)
            log.extend(bytes(batch) for batch in item.batches)
            answers.append(ProducedBatch(item.bucket, base, 1000))
        sent.on_done(answers)

    def release(self) -> None:
        """Answer everything sent so far, and every request from now on at once."""
        self.auto = True
        for sent in list(self.sent):
            self.answer(sent)


class FakeMetadata:
    def __init__(self, leaders: dict[int, ServerNode]) -> None:
        self.leaders = leaders  # by bucket number, for every partition

    def leader(self, physical_id: int, bucket: int) -> ServerNode:
        return self.leaders[bucket]

    def refresh(self, table_id: int) -> None:
        """The fake's leaders are always current."""


@pytest.fixture
def tablets() -> FakeTablets:
    return FakeTablets()


@pytest.fixture
def metadata() -> FakeMetadata:
    return FakeMetadata({0: NODE_A, 1: NODE_B})


@pytest.fixture
def router(metadata: FakeMetadata) -> LeaderRouter:
    return LeaderRouter(metadata, RetryPolicy(0.01, 0.02), 5.0)  # type: ignore[arg-type]


@pytest.fixture
def sender(tablets: FakeTablets, router: LeaderRouter) -> Iterator[Sender]:
    sender = Sender(tablets, router, max_in_flight=1)  # type: ignore[arg-type]
    yield sender
    sender.close()


def writer(
    sender: Sender, router: LeaderRouter, on_ack: Callable[[AppendAck], None] | None = None, idempotent: bool = True
) -> AppendWriter:
    conf = Configuration({"client.writer.linger": "1h", "client.writer.max-inflight": 100})
    return AppendWriter(TABLE, sender, router, conf, on_ack, identity=WriterIdentity(WRITER_ID, b"token") if idempotent else None)


def rows(partition_id: int, count: int) -> pa.Table:
    return pa.table({"dt": [f"p{partition_id}"] * count, "id": list(range(count))}, schema=SCHEMA)


def test_thirty_partitions_go_to_each_leader_in_one_request_within_the_in_flight_limit(
    tablets: FakeTablets, sender: Sender, router: LeaderRouter
) -> None:
    acks: list[AppendAck] = []
    appender = writer(sender, router, acks.append)
    for partition_id in range(1, 31):
        for bucket in (0, 1):
            appender.append_table_to(partition(partition_id), rows(partition_id, 3), bucket)
    wait_until(lambda: tablets.to(NODE_A) and tablets.to(NODE_B), "a first request to each leader")
    assert len(tablets.to(NODE_A)) == len(tablets.to(NODE_B)) == 1, "one request in flight per server (max-inflight 1)"
    for partition_id in range(1, 31):  # a second batch per bucket, while the first requests are unanswered
        for bucket in (0, 1):
            appender.append_table_to(partition(partition_id), rows(partition_id, 2), bucket)
    tablets.release()
    appender.flush()
    assert {sent.request.writer_token for sent in tablets.sent} == {b"token"}, "every request carries the writer's token"
    for node, bucket in ((NODE_A, 0), (NODE_B, 1)):
        requests = tablets.to(node)
        assert len(requests) == 2, f"30 partitions' batches for {node.address} in {len(requests)} requests"
        assert {key for sent in requests for key in sent.keys()} == {(p, bucket) for p in range(1, 31)}
    for (partition_id, bucket), log in tablets.logs.items():
        headers = [rb.read_header(batch) for batch in log]
        assert [(h.writer_id, h.batch_sequence, h.record_count) for h in headers] == [(WRITER_ID, 0, 3), (WRITER_ID, 1, 2)], (partition_id, bucket)
    covered: dict[tuple[int | None, int], int] = {}
    for ack in acks:  # a bucket's acknowledged ranges follow each other from offset 0
        assert ack.base_offset == covered.get((ack.partition_id, ack.bucket), 0)
        covered[ack.partition_id, ack.bucket] = ack.base_offset + ack.record_count
    assert covered == {(p, b): 5 for p in range(1, 31) for b in (0, 1)}
    appender.close()


def test_a_leader_move_mid_flight_resends_the_same_batches_to_the_new_leader(
    tablets: FakeTablets, sender: Sender, router: LeaderRouter, metadata: FakeMetadata
) -> None:
    appender = writer(sender, router)
    appender.append_table_to(partition(3), rows(3, 5), 0)
    first = wait_until(lambda: tablets.to(NODE_A), "the request to the first leader")[0]
    metadata.leaders[0] = NODE_B
    tablets.auto = True
    tablets.answer(first, errors={(3, 0): NotLeaderError("bucket 0 moved")})
    appender.flush()
    [again] = tablets.to(NODE_B)
    assert [bytes(b) for b in again.request.buckets[0].batches] == [bytes(b) for b in first.request.buckets[0].batches]
    assert [rb.read_header(batch).record_count for batch in tablets.logs[3, 0]] == [5]
    assert appender.delivery_stats.retried_batches == 1
    appender.close()


def test_a_report_that_raises_is_raised_from_flush_and_the_other_reports_are_served(
    tablets: FakeTablets, sender: Sender, router: LeaderRouter
) -> None:
    served: list[AppendAck] = []

    def on_ack(ack: AppendAck) -> None:
        served.append(ack)
        if ack.partition_id == 1:
            raise ValueError("the report of partition 1")

    tablets.auto = True
    appender = writer(sender, router, on_ack)
    for partition_id in (1, 2, 3):
        appender.append_table_to(partition(partition_id), rows(partition_id, 1), 0)
    with pytest.raises(ValueError, match="the report of partition 1"):
        appender.flush()
    assert sorted(ack.partition_id for ack in served) == [1, 2, 3]
    appender.flush()
    appender.close()


def test_a_closed_connection_fails_what_a_writer_held_and_a_late_answer_changes_nothing(
    tablets: FakeTablets, sender: Sender, router: LeaderRouter
) -> None:
    appender = writer(sender, router)
    appender.append_table_to(partition(1), rows(1, 4), 0)
    [held] = wait_until(lambda: tablets.to(NODE_A), "the request in flight")
    appender.append_table_to(partition(2), rows(2, 4), 0)  # waits behind it (one request per server)
    sender.close()
    with pytest.raises(LakelogError, match="the connection is closed"):
        appender.flush()
    tablets.answer(held)
    appender.flush()  # nothing left, nothing raised twice
    with pytest.raises(LakelogError, match="the connection is closed"):
        appender.append_table_to(partition(1), rows(1, 1), 0)
    assert len(tablets.sent) == 1


@pytest.fixture
def unacknowledged(tablets: FakeTablets, router: LeaderRouter) -> Iterator[Sender]:
    sender = Sender(tablets, router, max_in_flight=4, acks="0")  # type: ignore[arg-type]
    yield sender
    sender.close()


def test_with_acks_0_flush_returns_once_sent_and_a_bucket_sends_again_only_after_its_answer(
    tablets: FakeTablets, unacknowledged: Sender, router: LeaderRouter
) -> None:
    reports: list[AppendAck] = []
    appender = writer(unacknowledged, router, reports.append, idempotent=False)
    appender.append_table_to(partition(1), rows(1, 3), 0)
    appender.flush()  # nothing answered yet
    [first] = tablets.to(NODE_A)
    assert first.request.acks == 0
    assert [(r.base_offset, r.record_count, r.commit_timestamp) for r in reports] == [(-1, 3, -1)], "reports say the offset is unknown"
    appender.append_table_to(partition(1), rows(1, 2), 0)
    assert len(tablets.to(NODE_A)) == 1, "the bucket's next request waits for the answer to its last, so its records stay in order"
    tablets.release()
    appender.flush()
    assert [rb.read_header(batch).record_count for batch in tablets.logs[1, 0]] == [3, 2]
    assert {rb.read_header(batch).writer_id for batch in tablets.logs[1, 0]} == {rb.NO_WRITER}, "not idempotent: no writer id"
    appender.close()


def test_with_acks_0_a_refused_bucket_is_dropped_and_a_lost_connection_is_raised_by_the_next_flush(
    tablets: FakeTablets, unacknowledged: Sender, router: LeaderRouter
) -> None:
    appender = writer(unacknowledged, router, idempotent=False)
    appender.append_table_to(partition(1), rows(1, 3), 0)
    appender.flush()
    [refused] = tablets.to(NODE_A)
    tablets.answer(refused, errors={(1, 0): NotLeaderError("bucket 0 moved")})
    appender.append_table_to(partition(1), rows(1, 4), 0)
    appender.flush()  # the refusal is not reported per record
    assert appender.delivery_stats.failed_batches == 1 and appender.delivery_stats.retried_batches == 0
    lost = tablets.to(NODE_A)[1]
    assert [rb.read_header(b).record_count for b in lost.request.buckets[0].batches] == [4], "the refused batch is not resent"
    lost.on_done(NetworkError("tablet server a: connection reset"))
    with pytest.raises(NetworkError, match="connection reset"):
        appender.flush()
    appender.flush()  # raised once
    appender.close()


def test_ready_buckets_are_spread_over_the_requests_a_server_has_room_for(tablets: FakeTablets, router: LeaderRouter) -> None:
    sender = Sender(tablets, router, max_in_flight=4)  # type: ignore[arg-type]
    appender = writer(sender, router)
    with appender.accumulator.cond:  # the sender waits for the lock: every bucket is ready at its next turn
        for partition_id in range(1, 31):
            appender.append_table_to(partition(partition_id), rows(partition_id, 3), 0)
    requests = wait_until(lambda: len(tablets.to(NODE_A)) == 4 and tablets.to(NODE_A), "four requests to the leader")
    buckets = [sent.keys() for sent in requests]
    assert sorted(key for keys in buckets for key in keys) == [(p, 0) for p in range(1, 31)], "each bucket in one request"
    assert sorted(len(keys) for keys in buckets) == [7, 7, 8, 8], "the buckets shared out evenly"
    tablets.release()
    appender.close()
    sender.close()


def test_a_batch_encoded_while_its_bucket_moved_to_a_new_epoch_joins_the_new_epoch(router: LeaderRouter) -> None:
    accumulator = RecordAccumulator(Delivery(WriterIdentity(WRITER_ID, b"token"), router, 5.0), 1.0, None, reports=False)
    queue = accumulator.queue(partition(1), 0)
    batch = rows(1, 2).to_batches()[0]
    with accumulator.cond:
        for _ in range(2):
            writer_fields = accumulator.take(queue)
            accumulator.add(queue, rb.encode_batch_buffer(batch, TABLE.schema_id, writer=writer_fields), writer_fields)
        refused = accumulator.drain(queue, 1)  # the first batch; the second waits behind it
        writer_fields = accumulator.take(queue)  # a third, encoded outside the lock...
    encoded = rb.encode_batch_buffer(batch, TABLE.schema_id, writer=writer_fields)
    with accumulator.cond:  # ...while the first is given up on
        accumulator.complete(queue, refused, InvalidRequestError("refused"))
    with accumulator.cond:
        accumulator.add(queue, encoded, writer_fields)
    stamped = [rb.validate(bytes(data), 0, "bucket 0") for data in queue.sealed]
    assert [(h.writer_epoch, h.batch_sequence) for h in stamped] == [(1, 0), (1, 1)], "renumbered in order, CRCs valid"
    assert accumulator.pending == 2


def _pipelining(router: LeaderRouter, batches: int) -> tuple[RecordAccumulator, BucketQueue]:
    """An idempotent writer's accumulator allowing 3 requests in flight per bucket, ``batches``
    one-row batches sealed for bucket 0."""
    accumulator = RecordAccumulator(Delivery(WriterIdentity(WRITER_ID, b"token"), router, 5.0), 1.0, None, True, 3)
    queue = accumulator.queue(partition(1), 0)
    batch = rows(1, 1).to_batches()[0]
    with accumulator.cond:
        for _ in range(batches):
            writer_fields = accumulator.take(queue)
            accumulator.add(queue, rb.encode_batch_buffer(batch, TABLE.schema_id, writer=writer_fields), writer_fields)
    return accumulator, queue


def _two_in_flight(router: LeaderRouter, batches: int) -> tuple[RecordAccumulator, BucketQueue, list, list]:
    """As :func:`_pipelining`, the first request acknowledged and the next two in flight."""
    accumulator, queue = _pipelining(router, batches)
    with accumulator.cond:
        accumulator.complete(queue, accumulator.drain(queue, 1), ProducedBatch(0, 0, 1000))
        return accumulator, queue, accumulator.drain(queue, 1), accumulator.drain(queue, 1)


def _stamps(batches: Iterable[rb.EncodedBatch]) -> list[tuple[int, int]]:
    return [(h.writer_epoch, h.batch_sequence) for h in (rb.read_header(bytes(b)) for b in batches)]


def test_a_bucket_pipelines_once_its_leader_acknowledged_the_epoch_and_answers_settle_in_the_order_sent(router: LeaderRouter) -> None:
    accumulator, queue = _pipelining(router, 5)
    with accumulator.cond:
        first = accumulator.drain(queue, 1)
        assert accumulator.ready(0.0) == [], "no second request before the leader knows this epoch of the writer"
        accumulator.complete(queue, first, ProducedBatch(0, 0, 1000))
        flying = [accumulator.drain(queue, 1) for _ in range(3)]
        assert accumulator.ready(0.0) == [], "at most 3 in flight"
        accumulator.complete(queue, flying[2], ProducedBatch(0, 3, 1000))  # the third answered first...
        accumulator.complete(queue, flying[1], ProducedBatch(0, 2, 1000))
        assert [ack.base_offset for ack in accumulator.acks] == [0], "...is held until the ones sent before it are in"
        accumulator.complete(queue, flying[0], ProducedBatch(0, 1, 1000))
    assert [ack.base_offset for ack in accumulator.acks] == [0, 1, 2, 3]
    assert accumulator.pending == 1


def test_a_request_that_overtook_a_failed_one_is_resent_after_it_alone_and_unchanged(router: LeaderRouter) -> None:
    accumulator, queue, ahead, behind = _two_in_flight(router, 3)
    with accumulator.cond:
        accumulator.complete(queue, behind, OutOfOrderSequenceError("sequence 2, expected 1"))
        accumulator.complete(queue, ahead, NetworkError("connection reset"))
        assert accumulator.ready(queue.retry_at) == [queue]
        assert accumulator.drain(queue, 1) is ahead, "the failed request first, as it was"
        assert accumulator.ready(queue.retry_at) == [], "alone"
        accumulator.complete(queue, ahead, ProducedBatch(0, 1, 1000))
        assert accumulator.drain(queue, 1) is behind, "then the one that overtook it"
        accumulator.complete(queue, behind, ProducedBatch(0, 2, 1000))
    assert [ack.base_offset for ack in accumulator.acks] == [0, 1, 2]
    assert accumulator.pending == 0 and accumulator.error is None


def test_a_request_given_up_on_moves_the_unappended_ones_behind_it_to_a_new_epoch_in_order(router: LeaderRouter) -> None:
    accumulator, queue, refused, overtook = _two_in_flight(router, 5)
    with accumulator.cond:
        accumulator.complete(queue, refused, InvalidRequestError("refused"))
        assert accumulator.ready(0.0) == [], "nothing is sent while a request of the old epoch is out"
        accumulator.complete(queue, overtook, OutOfOrderSequenceError("sequence 2, expected 1"))
    assert _stamps(queue.sealed) == [(1, 0), (1, 1), (1, 2)], "the one that overtook first, then the sealed ones"
    assert rb.read_header(bytes(queue.sealed[0])).crc == rb.validate(bytes(queue.sealed[0]), 0, "bucket 0").crc
    assert accumulator.pending == 3 and isinstance(accumulator.error, InvalidRequestError)


def test_a_request_sent_behind_one_of_its_bucket_in_flight_says_so(tablets: FakeTablets, router: LeaderRouter) -> None:
    sender = Sender(tablets, router, max_in_flight=8)  # type: ignore[arg-type]
    appender = writer(sender, router)
    for sent in range(1, 4):
        appender.append_table_to(partition(3), rows(3, 2), 0)
        wait_until(lambda: len(tablets.to(NODE_A)) == sent, f"request {sent}")
        if sent == 1:
            tablets.answer(tablets.to(NODE_A)[0])  # the leader knows the writer now
    assert [sent.request.buckets[0].pipelined for sent in tablets.to(NODE_A)] == [False, False, True]
    tablets.release()
    appender.close()
    sender.close()
