"""The tablet server's ReplicaManager built directly: real bucket logs in a temporary directory, a
real remote tier on ``file://`` storage whose task runs only when a test says so, and the
coordinator a dictionary of assignments. Produce checks what it appends, a fetch answers from the
tier that holds an offset, and errors name the bucket at fault without losing anything."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Iterator, Sequence

import pyarrow as pa
import pytest

from lakelog.client.scanner.batch_decoder import decode_records
from lakelog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidRequestError,
    LakelogError,
    NetworkError,
    NotEnoughReplicasError,
    NotLeaderError,
    OffsetOutOfRangeError,
    PartitionNotExistError,
    RequestTimeoutError,
    SchemaMismatchError,
    ServerNotReadyError,
    TableNotExistError,
    UnknownBucketError,
    UnknownWriterError,
)
from lakelog.metadata import LakeBucketOffset, LakeSnapshot, OffsetSpec, PartitionInfo, TableInfo, TablePath
from lakelog.cluster_state import BucketReplicas, LakeOffsets, ServerNode, TableAssignment
from lakelog.record.batch import ATTR_PROJECTED, encode_batch, iter_headers
from lakelog.record.meta_columns import with_meta_fields
from lakelog.remote_fs import RemoteLocation
from lakelog.security.writer_tokens import WriterTokens, new_writer_key
from lakelog.server.log.log_manager import LogManager
from lakelog.server.log.log_tablet import LogConfig
from lakelog.server.log.writer_snapshot import decode_writer_snapshot
from lakelog.server.remote.remote_log_manager import RemoteLogManager
from lakelog.server.remote.remote_storage import RemoteLogStorage
from lakelog.server.replica.replica_fetcher import FetcherPool, FollowedBucket, FollowerFetch
from lakelog.server.replica.replica_manager import BucketFetch, FetchParams, ReplicaManager
from lakelog.server.replica.replication import Replication, ReplicationConfig
from lakelog.write_fence import fenced_leader
from tests.harness.clocks import FakeClock

SERVER = 1
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
ORDERS = TablePath("shop", "orders")
DAY_MS = 86_400_000
TIERED = {"table.log.ttl": "1h", "table.log.tiered.local-segments": "1"}


def rows(first: int, count: int) -> pa.RecordBatch:
    ids = list(range(first, first + count))
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array([f"n{i}" for i in ids])], schema=SCHEMA)


def batch(first: int, count: int = 10, **kwargs: object) -> bytes:
    return encode_batch(rows(first, count), schema_id=1, **kwargs)


class Coordinator:
    """What the replica manager asks the coordinator: a table's assignment by its physical id."""

    def __init__(self) -> None:
        self.assignments: dict[int, TableAssignment] = {}

    def add(self, info: TableInfo, leaders: dict[int, int], replicas: dict[int, BucketReplicas] | None = None) -> TableAssignment:
        assignment = TableAssignment(info, leaders, replicas or {})
        self.assignments[info.physical_id] = assignment
        return assignment

    def resolve(self, physical_id: int) -> TableAssignment:
        if physical_id not in self.assignments:
            raise TableNotExistError(f"table id {physical_id} does not exist")
        return self.assignments[physical_id]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def coordinator() -> Coordinator:
    return Coordinator()


@pytest.fixture
def remote(tmpfs_path: Path, clock: FakeClock) -> Iterator[RemoteLogManager]:
    storage = RemoteLogStorage(RemoteLocation.parse((tmpfs_path / "remote").as_uri()), {})
    manager = RemoteLogManager(storage, 3_600_000, clock=clock)
    yield manager
    manager.close()


@pytest.fixture
def replicas(tmpfs_path: Path, coordinator: Coordinator, remote: RemoteLogManager, clock: FakeClock) -> Iterator[ReplicaManager]:
    logs = LogManager(tmpfs_path / "log", LogConfig(segment_max_bytes=4096), clock=clock)
    manager = ReplicaManager(SERVER, logs, coordinator.resolve, remote)
    manager.mark_ready()
    yield manager
    manager.shutdown()
    logs.close_all()


def lead(replicas: ReplicaManager, coordinator: Coordinator, table_id: int = 7, buckets: int = 2, properties: dict[str, str] | None = None) -> TableInfo:
    info = TableInfo(table_id, ORDERS, SCHEMA, 1, buckets, properties or {})
    replicas.become_leader([coordinator.add(info, {b: SERVER for b in range(buckets)})])
    return info


def fetch(replicas: ReplicaManager, table_id: int, bucket: int, offset: int, enable_lake: bool = False, **params: object):
    [result] = replicas.read_fetch(FetchParams([BucketFetch(table_id, bucket, offset, 1 << 20)], enable_lake=enable_lake, **params))
    return result


def offsets_of(records: bytes | memoryview) -> list[tuple[int, int]]:
    return [(h.base_offset, h.record_count) for _, h in iter_headers(records)]


# ---------------------------------------------------------------- readiness and leadership


def test_a_server_answers_nothing_before_the_coordinator_told_it_its_buckets(tmpfs_path: Path, coordinator: Coordinator, remote: RemoteLogManager) -> None:
    starting = ReplicaManager(SERVER, LogManager(tmpfs_path / "starting", LogConfig()), coordinator.resolve, remote)
    with pytest.raises(ServerNotReadyError, match="tablet server 1 is starting"):
        starting.check_ready()
    starting.mark_ready()
    starting.check_ready()


def test_produced_batches_are_fetched_back_with_their_offsets_and_the_high_watermark(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    lead(replicas, coordinator)
    assert replicas.produce(7, 0, batch(0)).result.next_offset == 10
    assert replicas.produce(7, 0, batch(10, 5)).result.next_offset == 15
    result = fetch(replicas, 7, 0, 0)
    assert result.error is None and result.high_watermark == 15 and result.log_start_offset == 0
    assert offsets_of(result.records) == [(0, 10), (10, 5)]
    assert offsets_of(fetch(replicas, 7, 0, 10).records) == [(10, 5)]
    assert fetch(replicas, 7, 1, 0).high_watermark == 0


def test_a_table_the_server_has_not_heard_of_is_asked_of_the_coordinator(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    coordinator.add(TableInfo(9, ORDERS, SCHEMA, 1, 1, {}), {0: SERVER})
    assert not replicas.knows(9)
    replicas.produce(9, 0, batch(0))
    assert replicas.knows(9)
    with pytest.raises(TableNotExistError, match="table id 10 does not exist"):
        replicas.produce(10, 0, batch(0))


def test_a_bucket_led_elsewhere_or_missing_is_refused_naming_it(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    info = TableInfo(7, ORDERS, SCHEMA, 1, 2, {})
    replicas.become_leader([coordinator.add(info, {0: SERVER, 1: 2})])
    with pytest.raises(NotLeaderError, match="tablet server 1 does not lead shop.orders bucket 1"):
        replicas.produce(7, 1, batch(0))
    with pytest.raises(UnknownBucketError, match="shop.orders has no bucket 5 .*0..1"):
        replicas.produce(7, 5, batch(0))
    assert isinstance(fetch(replicas, 7, 1, 0).error, NotLeaderError)


def test_a_dropped_table_forgets_its_logs_and_its_directory(tmpfs_path: Path, replicas: ReplicaManager, coordinator: Coordinator) -> None:
    lead(replicas, coordinator)
    replicas.produce(7, 0, batch(0))
    assert any((tmpfs_path / "log").iterdir())
    replicas.drop_tables([7])
    assert not replicas.knows(7)
    assert not any((tmpfs_path / "log").rglob("*.log"))
    assert replicas.led_tables() == []


def test_polls_parked_on_a_dropped_table_answer_at_once(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    lead(replicas, coordinator)
    lead(replicas, coordinator, table_id=8)

    async def walk() -> None:
        dropped = asyncio.create_task(replicas.waiters.park([(7, 1)], replicas.waiters.arrivals(), 60))
        kept = asyncio.create_task(replicas.waiters.park([(8, 1)], replicas.waiters.arrivals(), 60))
        await asyncio.sleep(0)
        assert replicas.waiters.parked == 2
        del coordinator.assignments[7]
        replicas.drop_tables([7])
        for _ in range(5):
            await asyncio.sleep(0)
        assert dropped.done(), "a poll on the dropped table waited out its wait"
        assert not kept.done() and replicas.waiters.parked == 1
        kept.cancel()

    asyncio.run(walk())
    assert isinstance(fetch(replicas, 7, 1, 0).error, TableNotExistError), "what the woken poll reads again"


class QuietLeader:
    """A leader link whose fetches find nothing new: each waits until the fetcher cuts it short."""

    def fetch(self, leader: ServerNode, follower_id: int, fetches: Sequence[FollowerFetch], max_wait_ms: int, wake: threading.Event) -> None:
        wake.wait()

    def end_offset_for_epoch(self, leader: ServerNode, bucket: FollowedBucket, epoch: int) -> tuple[int, int]:
        return epoch, bucket.tablet.log_end_offset

    def done(self) -> None:
        """No connection to let go."""


def test_polls_parked_on_a_bucket_the_server_stops_leading_answer_at_once(tmpfs_path: Path, coordinator: Coordinator, remote: RemoteLogManager) -> None:
    fetchers = FetcherPool(SERVER, QuietLeader(), lambda server_id: ServerNode(server_id, "127.0.0.1", 1), 200, lambda bucket, offset, writers: None)
    logs = LogManager(tmpfs_path / "moving", LogConfig())
    replicas = ReplicaManager(SERVER, logs, coordinator.resolve, remote, replication=Replication(SERVER, ReplicationConfig(), fetchers))
    replicas.mark_ready()
    info = TableInfo(7, ORDERS, SCHEMA, 1, 2, {})

    def led_by(leader_of_0: int, epoch: int) -> TableAssignment:
        copies = {b: BucketReplicas((SERVER, 2), (SERVER, 2), leader_epoch=epoch) for b in (0, 1)}
        return coordinator.add(info, {0: leader_of_0, 1: SERVER}, copies)

    async def walk() -> None:
        moved = asyncio.create_task(replicas.waiters.park([(7, 0)], replicas.waiters.arrivals(), 60))
        kept = asyncio.create_task(replicas.waiters.park([(7, 1)], replicas.waiters.arrivals(), 60))
        await asyncio.sleep(0)
        assert replicas.waiters.parked == 2
        replicas.become_leader([led_by(2, epoch=2)])
        for _ in range(5):
            await asyncio.sleep(0)
        assert moved.done(), "a poll on the bucket now led elsewhere waited out its wait"
        assert not kept.done() and replicas.waiters.parked == 1
        kept.cancel()

    try:
        replicas.become_leader([led_by(SERVER, epoch=1)])
        asyncio.run(walk())
        assert isinstance(fetch(replicas, 7, 0, 0).error, NotLeaderError), "what the woken poll reads again"
    finally:
        replicas.shutdown()
        fetchers.close()
        logs.close_all()


def test_a_fenced_bucket_takes_no_writes_and_its_records_stay_readable(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    info = lead(replicas, coordinator, buckets=1)
    replicas.produce(7, 0, batch(0))
    replicas.become_leader([coordinator.add(info, {0: fenced_leader(SERVER)})])
    with pytest.raises(NotLeaderError, match="is being dropped: it takes no writes"):
        replicas.produce(7, 0, batch(10))
    assert offsets_of(fetch(replicas, 7, 0, 0).records) == [(0, 10)]
    replicas.become_leader([coordinator.add(info, {0: SERVER})])
    assert replicas.produce(7, 0, batch(10)).result.next_offset == 20


def test_a_partition_s_buckets_are_kept_under_its_own_id_and_must_belong_to_its_table(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    table = TableInfo(7, ORDERS, SCHEMA, 1, 1, {}, partition_keys=("name",))
    partition = table.for_partition(PartitionInfo(20, "a"))
    replicas.become_leader([coordinator.add(table, {}), coordinator.add(partition, {0: SERVER})])
    assert replicas.physical_id(7, 20) == 20
    assert replicas.physical_id(7, 0) == 7
    with pytest.raises(PartitionNotExistError, match="table id 8 has no partition with id 20"):
        replicas.physical_id(8, 20)
    with pytest.raises(PartitionNotExistError, match="is partitioned: a request names a partition id"):
        replicas.produce(7, 0, batch(0))
    replicas.produce(20, 0, batch(0))
    assert offsets_of(fetch(replicas, 20, 0, 0).records) == [(0, 10)]


def test_a_stopping_server_answers_unknown_tables_with_a_network_error(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    coordinator.add(TableInfo(9, ORDERS, SCHEMA, 1, 1, {}), {0: SERVER})
    replicas.shutdown()
    with pytest.raises(NetworkError, match="shutting down"):
        replicas.produce(9, 0, batch(0))


# ---------------------------------------------------------------- what produce checks


def test_a_batch_of_another_schema_is_refused_and_nothing_is_appended(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    lead(replicas, coordinator)
    other = encode_batch(pa.record_batch({"id": pa.array([1], pa.int32())}), schema_id=1)
    with pytest.raises(SchemaMismatchError, match="does not match table schema"):
        replicas.produce(7, 0, other)
    with pytest.raises(SchemaMismatchError, match="schema id 4; the table's are 1..1"):
        replicas.produce(7, 0, encode_batch(rows(0, 1), schema_id=4))
    assert fetch(replicas, 7, 0, 0).high_watermark == 0


def test_a_batch_with_attributes_a_producer_never_sets_is_refused(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    lead(replicas, coordinator)
    with pytest.raises(InvalidRecordError, match="has attributes 0x1; a producer sets none"):
        replicas.produce(7, 0, batch(0, attributes=ATTR_PROJECTED))
    assert fetch(replicas, 7, 0, 0).high_watermark == 0


@pytest.mark.parametrize(
    ("damage", "error", "message"),
    [("flipped", CorruptRecordError, "CRC"), ("cut", InvalidRequestError, "ends with a partial batch at byte 0")],
)
def test_damaged_bytes_are_refused_naming_the_damage_and_the_log_keeps_what_it_had(
    replicas: ReplicaManager, coordinator: Coordinator, damage: str, error: type[Exception], message: str
) -> None:
    lead(replicas, coordinator)
    replicas.produce(7, 0, batch(0))
    good = batch(10)
    bad = good[:-1] + bytes([good[-1] ^ 0xFF]) if damage == "flipped" else good[: len(good) // 2]
    with pytest.raises(error, match=message):
        replicas.produce(7, 0, bad)
    assert offsets_of(fetch(replicas, 7, 0, 0).records) == [(0, 10)]
    assert replicas.produce(7, 0, batch(10)).result.next_offset == 20


def test_a_writer_s_batches_need_the_token_the_coordinator_issued_for_its_id(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    lead(replicas, coordinator)
    stamped = batch(0, writer=(42, 0, 0))
    with pytest.raises(ServerNotReadyError, match="has no writer key yet"):
        replicas.produce(7, 0, stamped, caller="alice")
    tokens = WriterTokens(new_writer_key())
    replicas.writer_tokens = tokens
    with pytest.raises(UnknownWriterError, match="writer id 42 was not issued to principal 'alice'"):
        replicas.produce(7, 0, stamped, caller="alice", writer_token=b"forged token....")
    assert replicas.produce(7, 0, stamped, caller="alice", writer_token=tokens.issue(42, "alice")).result.next_offset == 10


def test_acks_all_is_refused_when_the_table_needs_more_in_sync_copies_than_there_are(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    lead(replicas, coordinator, properties={"table.log.replica.min-in-sync-replicas": "2"})
    with pytest.raises(NotEnoughReplicasError, match="fewer than min-in-sync-replicas 2; nothing was appended"):
        replicas.produce(7, 0, batch(0))
    assert replicas.produce(7, 0, batch(0), acks=1).result.next_offset == 10


def test_a_stopping_server_answers_the_produces_waiting_for_their_replication(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    """An acks=all produce waits for a follower that never fetches; the server stops: the produce is
    answered now, with an error an idempotent writer resends to the next leader, not when its
    timeout runs out (its RPC thread would outlive the server's stop)."""
    info = TableInfo(7, ORDERS, SCHEMA, 1, 1, {})
    replicas.become_leader([coordinator.add(info, {0: SERVER}, {0: BucketReplicas((SERVER, 2), (SERVER, 2), leader_epoch=1)})])
    produced = replicas.produce(7, 0, batch(0), timeout_ms=600_000)
    failures: list[LakelogError] = []

    def acknowledge() -> None:
        try:
            produced.replicated()
        except LakelogError as error:
            failures.append(error)

    waiting = threading.Thread(target=acknowledge)
    waiting.start()
    replicas.shutdown()
    waiting.join(60)
    assert not waiting.is_alive(), "still waiting for the follower after the stop"
    assert [type(error) for error in failures] == [RequestTimeoutError]
    assert "tablet server 1 is stopping: offsets of shop.orders bucket 0 up to 10 are not acknowledged here" in str(failures[0])


def test_a_new_leader_answers_offsets_only_once_its_high_watermark_reaches_its_epoch_start(
    replicas: ReplicaManager, coordinator: Coordinator
) -> None:
    """Records appended under the last epoch that the follower had not yet fetched: the leader of the
    next epoch starts with its high watermark behind them, and must not show a reader an end that
    went back, until the follower's fetch carries it past them."""
    info = TableInfo(7, ORDERS, SCHEMA, 1, 1, {})
    replicas.become_leader([coordinator.add(info, {0: SERVER}, {0: BucketReplicas((SERVER, 2), (SERVER, 2), leader_epoch=1)})])
    replicas.produce(7, 0, batch(0), acks=1)
    replicas.become_leader([coordinator.add(info, {0: SERVER}, {0: BucketReplicas((SERVER, 2), (SERVER, 2), leader_epoch=2)})])
    with pytest.raises(ServerNotReadyError, match="its high watermark 0 has not reached 10, where its leader epoch began"):
        replicas.list_offset(7, 0, OffsetSpec.latest())
    replicas.read_fetch(FetchParams([BucketFetch(7, 0, 10, 1 << 20, leader_epoch=2)], follower_id=2))
    assert replicas.list_offset(7, 0, OffsetSpec.latest()).offset == 10


# ---------------------------------------------------------------- fetch


def test_bad_fetch_parameters_are_refused(replicas: ReplicaManager) -> None:
    with pytest.raises(InvalidRequestError, match="max_bytes > 0"):
        ReplicaManager.check_fetch(FetchParams([], max_bytes=0))
    with pytest.raises(InvalidRequestError, match="max_wait_ms >= 0"):
        ReplicaManager.check_fetch(FetchParams([], max_wait_ms=-1))


def test_a_bad_bucket_of_a_fetch_fails_alone(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    lead(replicas, coordinator)
    replicas.produce(7, 0, batch(0))
    results = replicas.read_fetch(FetchParams([BucketFetch(7, 1, -3, 1 << 20), BucketFetch(7, 0, 0, 1 << 20), BucketFetch(7, 0, 99, 1 << 20)]))
    assert isinstance(results[0].error, InvalidRequestError) and "fetch_offset must be >= 0" in str(results[0].error)
    assert results[1].error is None and offsets_of(results[1].records) == [(0, 10)]
    assert isinstance(results[2].error, OffsetOutOfRangeError) and results[2].log_start_offset == 0


def test_one_fetch_stays_within_its_byte_budget_across_buckets(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    lead(replicas, coordinator)
    for bucket in (0, 1):
        replicas.produce(7, bucket, batch(0, 100))
    size = len(fetch(replicas, 7, 0, 0).records)
    both = replicas.read_fetch(FetchParams([BucketFetch(7, 0, 0, 1 << 20), BucketFetch(7, 1, 0, 1 << 20)], max_bytes=size))
    assert len(both[0].records) == size and both[1].records == b"" and both[1].high_watermark == 100


def test_a_fetch_is_complete_once_it_has_min_bytes_or_an_error(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    lead(replicas, coordinator)
    empty = replicas.read_fetch(FetchParams([BucketFetch(7, 0, 0, 1 << 20)], min_bytes=1))
    assert not replicas.fetch_complete(FetchParams([], min_bytes=1), empty)
    replicas.produce(7, 0, batch(0))
    assert replicas.fetch_complete(FetchParams([], min_bytes=1), replicas.read_fetch(FetchParams([BucketFetch(7, 0, 0, 1 << 20)])))
    failed = replicas.read_fetch(FetchParams([BucketFetch(7, 0, 50, 1 << 20)]))
    assert replicas.fetch_complete(FetchParams([], min_bytes=1 << 20), failed)


def test_a_projected_fetch_carries_only_the_chosen_columns(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    lead(replicas, coordinator)
    replicas.produce(7, 0, batch(0, 3))
    result = fetch(replicas, 7, 0, 0, projections={7: [1]})
    decoded, _ = decode_records(result.records, 0, 0, with_meta_fields(pa.schema([SCHEMA.field("name")])), "bucket 0")
    assert decoded.column("name").to_pylist() == ["n0", "n1", "n2"]
    assert "id" not in decoded.schema.names


# ---------------------------------------------------------------- tiers and offsets


def _tiered(replicas: ReplicaManager, coordinator: Coordinator, remote: RemoteLogManager, properties: dict[str, str]) -> int:
    """Bucket 0 of table 7 rolled over many segments, the rolled ones uploaded; its local log start."""
    lead(replicas, coordinator, buckets=1, properties=properties)
    for first in range(0, 400, 20):
        replicas.produce(7, 0, batch(first, 20))
    report = remote.run_once()
    assert report.errors == [] and report.uploaded > 0
    described = replicas.describe(7, 0).info
    assert 0 == described.remote_log_start_offset < described.local_log_start_offset
    return described.local_log_start_offset


def test_below_the_local_log_the_answer_is_where_the_remote_segment_lies(replicas: ReplicaManager, coordinator: Coordinator, remote: RemoteLogManager) -> None:
    local_start = _tiered(replicas, coordinator, remote, TIERED)
    below = fetch(replicas, 7, 0, 0)
    assert below.records == b"" and below.error is None
    assert below.remote_log_fetch_info is not None and below.log_start_offset == 0
    assert offsets_of(fetch(replicas, 7, 0, local_start).records)[0][0] == local_start
    assert replicas.list_offset(7, 0, OffsetSpec.earliest()).offset == 0
    assert replicas.list_offset(7, 0, OffsetSpec.latest()).offset == 400


def test_a_follower_below_the_local_log_is_told_where_the_local_log_starts(replicas: ReplicaManager, coordinator: Coordinator, remote: RemoteLogManager) -> None:
    """A copy whose disk was wiped asks for offset 0: a reader there is pointed at the remote segment,
    but a follower copies only the local log, so it must learn the local log start (the earliest
    offset of any tier left it asking for offset 0 forever, out of the ISR), and the idempotent
    writers whose batches lie below it."""
    info = TableInfo(7, ORDERS, SCHEMA, 1, 1, TIERED)
    replicas.become_leader([coordinator.add(info, {0: SERVER}, {0: BucketReplicas((SERVER, 2), (SERVER, 2), leader_epoch=1)})])
    replicas.writer_tokens = tokens = WriterTokens(new_writer_key())
    replicas.produce(7, 0, batch(0, 20, writer=(42, 0, 0)), caller="alice", writer_token=tokens.issue(42, "alice"), acks=1)
    for first in range(20, 400, 20):
        replicas.produce(7, 0, batch(first, 20), acks=1)
    replicas.read_fetch(FetchParams([BucketFetch(7, 0, 400, 1 << 20, leader_epoch=1)], follower_id=2))  # the copy has it all
    assert remote.run_once().uploaded > 0
    local_start = replicas.describe(7, 0).info.local_log_start_offset
    assert local_start > 0

    [answer] = replicas.read_fetch(FetchParams([BucketFetch(7, 0, 0, 1 << 20, leader_epoch=1)], follower_id=2))

    assert isinstance(answer.error, OffsetOutOfRangeError) and answer.error.earliest == local_start
    assert answer.log_start_offset == local_start and answer.records == b""
    at, [writer] = decode_writer_snapshot(answer.writer_state, "the answer")
    assert (at, writer.writer_id, [(b.sequence, b.base_offset, b.next_offset) for b in writer.batches]) == (local_start, 42, [(0, 0, 20)])
    assert fetch(replicas, 7, 0, 0).remote_log_fetch_info is not None  # a reader is still sent to remote storage
    [copied] = replicas.read_fetch(FetchParams([BucketFetch(7, 0, local_start, 1 << 20, leader_epoch=1)], follower_id=2))
    assert copied.error is None and offsets_of(copied.records)[0][0] == local_start


def test_what_only_the_lake_holds_is_answered_with_the_snapshot_for_a_lake_reader_alone(
    replicas: ReplicaManager, coordinator: Coordinator, remote: RemoteLogManager, clock: FakeClock
) -> None:
    local_start = _tiered(replicas, coordinator, remote, {**TIERED, "table.datalake.enabled": "true"})
    replicas.lake.update([LakeOffsets(7, LakeSnapshot(5, {0: LakeBucketOffset(0, local_start, clock.now)}))])
    clock.now += 2 * DAY_MS
    assert remote.run_once().expired > 0
    lake_read = fetch(replicas, 7, 0, 0, enable_lake=True)
    assert lake_read.lake_log_fetch_info is not None and lake_read.lake_log_fetch_info.snapshot_id == 5
    assert lake_read.log_start_offset == 0
    plain = fetch(replicas, 7, 0, 0)
    assert isinstance(plain.error, OffsetOutOfRangeError) and plain.log_start_offset > 0
    assert replicas.list_offset(7, 0, OffsetSpec.earliest(), enable_lake=True).offset == 0
    assert replicas.list_offset(7, 0, OffsetSpec.earliest()).offset == plain.log_start_offset


def test_a_timestamp_the_lake_covers_is_left_to_the_lake_and_others_are_found_in_the_log(
    replicas: ReplicaManager, coordinator: Coordinator, clock: FakeClock
) -> None:
    lead(replicas, coordinator, buckets=1)
    stamps = []
    for first in range(0, 50, 10):
        stamps.append(clock.now)
        replicas.produce(7, 0, batch(first))
        clock.now += 1000
    assert replicas.list_offset(7, 0, OffsetSpec.timestamp(stamps[2])).offset == 20
    assert replicas.list_offset(7, 0, OffsetSpec.timestamp(clock.now + 10)).offset == 50
    replicas.lake.update([LakeOffsets(7, LakeSnapshot(3, {0: LakeBucketOffset(0, 30, stamps[2])}))])
    assert replicas.list_offset(7, 0, OffsetSpec.timestamp(stamps[1]), enable_lake=True).lake_snapshot_id == 3
    assert replicas.list_offset(7, 0, OffsetSpec.timestamp(stamps[3]), enable_lake=True).offset == 30


def test_describe_gives_one_consistent_look_at_a_bucket(replicas: ReplicaManager, coordinator: Coordinator) -> None:
    lead(replicas, coordinator, buckets=1)
    replicas.produce(7, 0, batch(0))
    replicas.lake.update([LakeOffsets(7, LakeSnapshot(2, {0: LakeBucketOffset(0, 4)}))])
    described = replicas.describe(7, 0)
    info = described.info
    assert (info.leader, info.replicas, info.isr, info.high_watermark) == (SERVER, (SERVER,), (SERVER,), 10)
    assert (info.local_log_start_offset, info.remote_log_start_offset, info.lake_log_end_offset) == (0, -1, 4)
    assert (described.local_segments, described.remote_segments) == (1, 0)
