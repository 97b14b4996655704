"""The client's rules alone: which rows go to which bucket (a stable hash every client shares, or a
sticky bucket that moves on once a batch is sealed), when a failed request is tried again and how
long the client waits, how a poll's record cap is shared, and how much a scanner reads ahead."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pyarrow as pa
import pytest

from lakelog.client.admin import Admin
from lakelog.client.rpc.messages import ListedOffset
from lakelog.client.bucket_assigner import BucketAssigner, murmur3_32, split_rows
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.retry_policy import RetryPolicy
from lakelog.client.scanner.read_ahead_budget import ReadAheadBudget
from lakelog.client.scanner.record_quota import RecordQuota
from lakelog.errors import (
    LakeError,
    LakelogError,
    NetworkError,
    NotEnoughReplicasError,
    NotLeaderError,
    PartitionNotExistError,
    RemoteStorageError,
    RequestTimeoutError,
    SchemaMismatchError,
    ServerNotReadyError,
    ServerUnreachableError,
    TableNotExistError,
    UnknownBucketError,
)
from lakelog.metadata import MAX_BUCKETS, PartitionInfo, TableInfo, TablePath
from lakelog.cluster_state import ServerNode

# ---------------------------------------------------------------- buckets


def test_murmur3_matches_the_reference_vectors() -> None:
    """The documented hash is MurmurHash3 x86 32: the published test vectors hold."""
    assert murmur3_32(b"") == 0
    assert murmur3_32(b"", 1) == 0x514E28B7
    assert murmur3_32(b"hello") == 0x248BFA47
    assert murmur3_32(b"Hello, world!", 1234) == 0xFAF6CDB3
    assert murmur3_32(b"The quick brown fox jumps over the lazy dog") == 0x2E4FF723


def test_rows_and_arrow_hash_alike_for_every_key_type() -> None:
    schema = pa.schema(
        [("s", pa.string()), ("i", pa.int32()), ("d", pa.date32()), ("t", pa.timestamp("ms")), ("b", pa.bool_())]
    )
    assigner = BucketAssigner(16, list(schema), "t")
    table = pa.table(
        {
            "s": ["a", None, "ü", "a"],
            "i": [1, -5, None, 1],
            "d": pa.array([0, 19000, 1, 0], pa.date32()),
            "t": pa.array([0, 1_700_000_000_000, None, 0], pa.timestamp("ms")),
            "b": [True, False, None, True],
        },
        schema=schema,
    )
    from_arrow = assigner.arrow_buckets(table).to_pylist()
    from_rows = [assigner.row_bucket(row) for row in table.to_pylist()]
    assert from_arrow == from_rows
    assert from_rows[0] == from_rows[3]


def test_a_sticky_writer_stays_on_its_bucket_until_a_batch_of_it_is_sealed_then_moves_to_the_next() -> None:
    assigner = BucketAssigner(3, [], "shop.orders")
    first = assigner.current
    assert not assigner.keyed
    assigner.sealed((first + 1) % 3)
    assert assigner.current == first, "a batch of another bucket does not move it"
    seen = []
    for _ in range(3):
        seen.append(assigner.current)
        assigner.sealed(assigner.current)
    assert sorted(seen) == [0, 1, 2] and assigner.current == first


def test_a_row_whose_key_cannot_be_hashed_as_its_type_is_refused_naming_the_table() -> None:
    assigner = BucketAssigner(4, [pa.field("user_id", pa.int64())], "shop.orders")
    with pytest.raises(SchemaMismatchError, match="shop.orders: bucket key of row"):
        assigner.row_bucket({"user_id": "not a number"})


def test_several_key_columns_fold_in_key_order() -> None:
    both = BucketAssigner(1 << 16, [pa.field("a", pa.string()), pa.field("b", pa.string())], "t")
    swapped = BucketAssigner(1 << 16, [pa.field("b", pa.string()), pa.field("a", pa.string())], "t")
    row = {"a": "x", "b": "y"}
    assert both.row_bucket(row) != swapped.row_bucket(row)
    assert both.key_names == ["a", "b"]


def test_a_table_splits_by_bucket_keeping_each_bucket_s_rows_in_order() -> None:
    assigner = BucketAssigner(4, [pa.field("k", pa.string())], "t")
    table = pa.table({"k": [f"key{i % 5}" for i in range(40)], "n": list(range(40))})
    parts = assigner.split(table)
    assert sorted(bucket for bucket, _ in parts) == sorted({assigner.row_bucket({"k": f"key{i}"}) for i in range(5)})
    assert sum(part.num_rows for _, part in parts) == 40
    for bucket, part in parts:
        assert part.column("n").to_pylist() == sorted(part.column("n").to_pylist())
        assert {assigner.row_bucket({"k": k}) for k in part.column("k").to_pylist()} == {bucket}


def test_rows_split_by_key_in_key_order_each_group_in_the_order_given() -> None:
    table = pa.table({"n": [0, 1, 2, 3, 4]})
    by_name = split_rows(table, pa.array(["b", "a", "b", "c", "a"]))
    assert [(key, part.column("n").to_pylist()) for key, part in by_name] == [("a", [1, 4]), ("b", [0, 2]), ("c", [3])]
    by_number = split_rows(table, pa.array([7, 2, 7, 2, 0]))
    assert [(key, part.column("n").to_pylist()) for key, part in by_number] == [(0, [4]), (2, [1, 3]), (7, [0, 2])]


# ---------------------------------------------------------------- retries

POLICY = RetryPolicy(backoff_s=0.001, max_backoff_s=0.004)


@pytest.mark.parametrize(
    ("error", "resend_safe", "retried"),
    [
        (NotLeaderError("moved"), False, True),
        (ServerNotReadyError("starting"), False, True),
        (ServerUnreachableError("never sent"), False, True),
        (NotEnoughReplicasError("isr"), False, True),
        (NetworkError("lost"), True, True),
        (NetworkError("lost"), False, False),
        (RequestTimeoutError("slow"), False, False),
        (RemoteStorageError("s3 down"), True, False),
        (LakeError("catalog down"), True, False),
        (TableNotExistError("gone"), True, False),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, LakelogError) else str(value),
)
def test_only_what_was_not_applied_or_is_safe_to_resend_is_retried(error: LakelogError, resend_safe: bool, retried: bool) -> None:
    assert POLICY.should_retry(error, resend_safe) is retried


def test_waits_double_up_to_the_ceiling_and_are_jittered_over_their_upper_half() -> None:
    policy = RetryPolicy(backoff_s=0.1, max_backoff_s=1.0)
    for attempt, ceiling in [(0, 0.1), (1, 0.2), (2, 0.4), (3, 0.8), (4, 1.0), (60, 1.0)]:
        waits = [policy.delay_s(attempt) for _ in range(50)]
        assert all(ceiling / 2 <= wait <= ceiling for wait in waits)
        assert len(set(waits)) > 1


def test_a_failure_that_may_mean_a_move_reloads_the_leaders() -> None:
    assert RetryPolicy.needs_metadata(NotLeaderError("moved"))
    assert RetryPolicy.needs_metadata(NetworkError("lost"))
    assert not RetryPolicy.needs_metadata(TableNotExistError("gone"))


INFO = TableInfo(5, TablePath("shop", "orders"), pa.schema([("id", pa.int64())]), 1, 4, {})


class Leaders:
    """The client's metadata cache: leaders by bucket, and how often a table was reloaded."""

    def __init__(self, leaders: dict[int, int]) -> None:
        self.leaders = leaders
        self.refreshed: list[int] = []

    def leader(self, table_id: int, bucket: int) -> ServerNode:
        return ServerNode(self.leaders[bucket], "tablet", 9000 + self.leaders[bucket])

    def refresh(self, table_id: int) -> None:
        self.refreshed.append(table_id)


def _router(leaders: Leaders, timeout_s: float = 5.0) -> LeaderRouter:
    return LeaderRouter(leaders, POLICY, timeout_s)  # type: ignore[arg-type]


def test_a_call_refused_for_routing_is_tried_again_after_the_leaders_are_reloaded() -> None:
    leaders = Leaders({0: 1})
    failures = [NotLeaderError("moved"), NotLeaderError("moved")]

    def action() -> str:
        if failures:
            raise failures.pop()
        return "done"

    assert _router(leaders).call(action, "lookup", resend_safe=False, tables=[5]) == "done"
    assert leaders.refreshed == [5, 5]


def test_a_call_that_may_have_been_applied_is_not_resent_unless_safe() -> None:
    calls: list[int] = []

    def action() -> Any:
        calls.append(1)
        raise NetworkError("lost in transport")

    with pytest.raises(NetworkError):
        _router(Leaders({0: 1})).call(action, "produce", resend_safe=False)
    assert len(calls) == 1


def test_a_call_gives_up_with_the_last_error_once_its_time_is_spent() -> None:
    calls: list[int] = []

    def action() -> Any:
        calls.append(1)
        raise NotLeaderError(f"attempt {len(calls)}")

    with pytest.raises(NotLeaderError, match="attempt"):
        _router(Leaders({0: 1}), timeout_s=0.05).call(action, "lookup", resend_safe=True)
    assert len(calls) > 1


def test_buckets_are_grouped_by_their_leader_and_a_bucket_the_table_lacks_is_refused() -> None:
    router = _router(Leaders({0: 1, 1: 2, 2: 1, 3: 3}))
    groups = {node.server_id: buckets for node, buckets in router.by_leader(INFO, None).items()}
    assert groups == {1: [0, 2], 2: [1], 3: [3]}
    assert {node.server_id: b for node, b in router.by_leader(INFO, [3, 1]).items()} == {3: [3], 2: [1]}
    with pytest.raises(UnknownBucketError, match="shop.orders has no bucket 4 .*0..3"):
        router.by_leader(INFO, [4])


def _recording(sent: list[tuple[int, list[tuple[int | None, list[int]]]]]) -> Any:
    """A send that records what each leader was asked and answers ``(partition, bucket)`` pairs."""

    def send(node: ServerNode, groups: list[tuple[TableInfo, list[int]]]) -> list[tuple[int | None, int]]:
        sent.append((node.server_id, [(info.partition_id, buckets) for info, buckets in groups]))
        return [(info.partition_id, b) for info, buckets in groups for b in buckets]

    return send


def test_one_send_per_leader_and_the_answers_joined() -> None:
    router = _router(Leaders({0: 1, 1: 2, 2: 1, 3: 2}))
    sent: list[tuple[int, list[tuple[int | None, list[int]]]]] = []
    assert sorted(router.call_leaders([INFO], None, _recording(sent), "ListOffsets")) == [(None, b) for b in range(4)]
    assert sorted(sent) == [(1, [(None, [0, 2])]), (2, [(None, [1, 3])])]


def test_partitions_of_a_table_are_asked_of_each_leader_in_one_send() -> None:
    router = _router(Leaders({0: 1, 1: 2, 2: 1, 3: 2}))
    partitions = [INFO.for_partition(PartitionInfo(p, f"day=d{p}")) for p in (11, 12, 13)]
    sent: list[tuple[int, list[tuple[int | None, list[int]]]]] = []
    answers = router.call_leaders(partitions, [3, 0], _recording(sent), "ListOffsets")
    assert sorted(answers) == [(p, b) for p in (11, 12, 13) for b in (0, 3)]
    assert sorted(sent) == [(1, [(11, [0]), (12, [0]), (13, [0])]), (2, [(11, [3]), (12, [3]), (13, [3])])]


def test_a_leader_of_more_buckets_than_a_request_may_name_is_sent_several_requests() -> None:
    wide = dataclasses.replace(INFO, buckets=400)
    router = _router(Leaders({b: 1 for b in range(400)}))
    partitions = [wide.for_partition(PartitionInfo(p, f"day=d{p}")) for p in (11, 12, 13)]
    sent: list[tuple[int, list[tuple[int | None, list[int]]]]] = []
    assert len(router.call_leaders(partitions, None, _recording(sent), "ListOffsets")) == 1200
    assert [[(p, len(buckets)) for p, buckets in groups] for _, groups in sent] == [[(11, 400), (12, 400)], [(13, 400)]]
    assert all(sum(len(buckets) for _, buckets in groups) <= MAX_BUCKETS for _, groups in sent)


class Tablets:
    """Tablet servers at the gateway seam: bucket b of partition p is at offset 10p + b, unless
    ``errors`` holds what ``(p, b)`` answers (popped: a retry finds it gone). ``old``: a server that
    predates ``partitions_req``, answering the first partition of each request alone."""

    def __init__(self, old: bool = False, errors: dict[tuple[int, int], LakelogError] | None = None) -> None:
        self.old = old
        self.errors = errors or {}
        self.asked: list[list[int]] = []

    def list_offsets(self, node: ServerNode, table_id: int, partitions: list[tuple[int, list[int]]], spec: Any, lake: bool) -> list[ListedOffset]:
        self.asked.append([p for p, _ in partitions])
        answered = partitions[:1] if self.old else partitions
        return [ListedOffset(b, 10 * p + b, partition_id=p, error=self.errors.pop((p, b), None)) for p, buckets in answered for b in buckets]


def _partitions_admin(tablets: Tablets) -> tuple[Admin, list[TableInfo]]:
    two = dataclasses.replace(INFO, buckets=2)
    return Admin(None, tablets, _router(Leaders({0: 1, 1: 2}))), [two.for_partition(PartitionInfo(p, f"day=d{p}")) for p in (11, 12, 13)]  # type: ignore[arg-type]


def test_partitions_are_listed_in_one_request_per_leader() -> None:
    tablets = Tablets()
    admin, partitions = _partitions_admin(tablets)
    assert admin.list_partitions_offsets(partitions) == {p: {0: 10 * p, 1: 10 * p + 1} for p in (11, 12, 13)}
    assert tablets.asked == [[11, 12, 13], [11, 12, 13]]


def test_partitions_a_server_too_old_to_list_together_are_asked_one_by_one() -> None:
    tablets = Tablets(old=True)
    admin, partitions = _partitions_admin(tablets)
    assert admin.list_partitions_offsets(partitions) == {p: {0: 10 * p, 1: 10 * p + 1} for p in (11, 12, 13)}
    assert sorted(tablets.asked) == [[11, 12, 13], [11, 12, 13], [12], [12], [13], [13]]


def test_a_dropped_partition_lists_as_none_a_moved_leader_is_retried_and_other_errors_raise() -> None:
    tablets = Tablets(errors={(12, 1): PartitionNotExistError("no partition 12"), (13, 0): NotLeaderError("moved")})
    admin, partitions = _partitions_admin(tablets)
    assert admin.list_partitions_offsets(partitions) == {11: {0: 110, 1: 111}, 12: None, 13: {0: 130, 1: 131}}
    assert len(tablets.asked) > 2  # the lookup was asked again after the leader moved
    admin, partitions = _partitions_admin(Tablets(errors={(11, 0): SchemaMismatchError("broken")}))
    with pytest.raises(SchemaMismatchError, match="broken"):
        admin.list_partitions_offsets(partitions)


def test_a_caller_with_requests_in_flight_is_told_when_to_resend_or_not_at_all() -> None:
    router = _router(Leaders({0: 1}))
    assert router.retry_delay_s(TableNotExistError("gone"), 0, True, 5) is None
    delay = router.retry_delay_s(NotEnoughReplicasError("isr"), 2, False, 5)
    assert delay is not None and 0.002 <= delay <= 0.004


# ---------------------------------------------------------------- a poll's share and the read-ahead budget


def test_a_poll_cap_is_shared_evenly_and_what_one_part_leaves_goes_to_the_rest() -> None:
    quota = RecordQuota(10, parts=3)
    assert quota.share() == 4
    quota.took(1)
    assert quota.share() == 5, "nine left over two parts"
    quota.took(5)
    assert quota.share() == 4
    quota.took(4)
    assert quota.exhausted


def test_no_cap_means_no_share() -> None:
    quota = RecordQuota(None, parts=4)
    assert quota.share() is None
    quota.took(10**6)
    assert not quota.exhausted
    assert RecordQuota(0, parts=2).share() is None


def test_the_read_ahead_budget_holds_up_to_its_limit_and_one_piece_always_fits_an_empty_budget() -> None:
    budget = ReadAheadBudget(100)
    assert budget.try_reserve(60) and not budget.try_reserve(50) and budget.try_reserve(40)
    assert budget.held == 100 and not budget.has_room(1)
    budget.release(100)
    assert budget.try_reserve(500), "a piece larger than the budget still makes progress"
    budget.add(10)
    assert budget.held == 510
    budget.release(1000)
    assert budget.held == 0


def test_a_blocked_reservation_waits_for_room_or_gives_up_when_stopped() -> None:
    budget = ReadAheadBudget(100)
    budget.try_reserve(100)
    stop = threading.Event()
    stop.set()
    assert not budget.reserve(10, stop)
    reserved: list[bool] = []
    waiter = threading.Thread(target=lambda: reserved.append(budget.reserve(30, threading.Event())))
    waiter.start()
    budget.release(50)
    waiter.join(10)
    assert reserved == [True] and budget.held == 80


def test_open_readers_are_bounded_by_what_the_budget_holds() -> None:
    budget = ReadAheadBudget(12 << 20)
    assert budget.max_readers == 3
    assert all(budget.try_open_reader() for _ in range(3))
    assert not budget.try_open_reader()
    budget.reader_closed()
    assert budget.try_open_reader()
    assert ReadAheadBudget(1).max_readers == 1
