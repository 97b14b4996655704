"""The coordinator's lake bookkeeping and its replica decisions, built directly on a temporary SQLite
store with recording fakes of its tablet servers: lake snapshots only move forward and each leader
learns only its buckets' ranges; ISR changes are accepted from the current leader alone; a server
that stops heartbeating loses its leaderships to in-sync copies; writer ids and tiering jobs persist."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakelog.errors import (
    InvalidReplicationFactorError,
    InvalidRequestError,
    LakeSnapshotNotExistError,
    NetworkError,
    NotLeaderError,
    StaleLakeSnapshotError,
    UnknownWriterError,
)
from lakelog.metadata import LakeBucketOffset, LakeSnapshot, TableDescriptor, TableInfo, TablePath
from lakelog.cluster_state import BucketReplicas, ServerNode
from lakelog.security.writer_tokens import WriterTokens
from lakelog.server.coordinator.coordinator import Coordinator
from lakelog.server.coordinator.tablet_liveness import TabletLiveness
from tests.harness.clocks import FakeClock
from tests.harness.coordinator_seams import RecordingTablets, coordinator_on
from tests.harness.waiting import wait_until

SCHEMA = pa.schema([("id", pa.int64())])
ORDERS = TablePath("shop", "orders")
LAKE = {"table.datalake.enabled": "true"}


def _snapshot(snapshot_id: int, ends: dict[int, int]) -> LakeSnapshot:
    return LakeSnapshot(snapshot_id, {bucket: LakeBucketOffset(0, end) for bucket, end in ends.items()})


# ---------------------------------------------------------------- lake snapshots


def test_a_table_has_no_lake_snapshot_until_a_round_commits(coordinator: Coordinator) -> None:
    table_id = coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 2, LAKE))
    with pytest.raises(LakeSnapshotNotExistError, match="shop.orders has no lake snapshot yet"):
        coordinator.lake_snapshot(table_id)


def test_a_commit_is_stored_counted_and_each_leader_learns_only_its_buckets(coordinator: Coordinator, tablets: RecordingTablets) -> None:
    table_id = coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 3, LAKE))
    commit = coordinator.commit_lake_snapshot(table_id, _snapshot(1, {0: 100, 1: 200, 2: 300}))
    assert (commit.path, commit.records_added) == (ORDERS, 600)
    assert coordinator.lake_snapshot(table_id) == _snapshot(1, {0: 100, 1: 200, 2: 300})
    leaders = coordinator.assignment(coordinator.table(ORDERS)).leaders
    for server_id, offsets in tablets.lake_offsets:
        [told] = offsets
        assert set(told.snapshot.bucket_offsets) == {b for b, s in leaders.items() if s == server_id}


def test_a_later_commit_counts_only_the_records_it_adds_and_a_resent_one_adds_none(coordinator: Coordinator) -> None:
    table_id = coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 2, LAKE))
    coordinator.commit_lake_snapshot(table_id, _snapshot(1, {0: 100, 1: 100}))
    assert coordinator.commit_lake_snapshot(table_id, _snapshot(2, {0: 150, 1: 100})).records_added == 50
    assert coordinator.commit_lake_snapshot(table_id, _snapshot(2, {0: 150, 1: 100})).records_added == 0


def test_a_snapshot_behind_the_one_held_is_refused_and_the_held_one_stays(coordinator: Coordinator) -> None:
    table_id = coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 2, LAKE))
    coordinator.commit_lake_snapshot(table_id, _snapshot(2, {0: 100, 1: 100}))
    with pytest.raises(StaleLakeSnapshotError, match="bucket 1: lake snapshot 1 ends at offset 40, behind snapshot 2"):
        coordinator.commit_lake_snapshot(table_id, _snapshot(1, {0: 100, 1: 40}))
    assert coordinator.lake_snapshot(table_id).snapshot_id == 2


@pytest.mark.parametrize(
    ("snapshot", "message"),
    [
        (_snapshot(1, {5: 10}), "has no bucket 5"),
        (LakeSnapshot(1, {0: LakeBucketOffset(20, 10)}), "is not a range"),
        (LakeSnapshot(1, {(99, 0): LakeBucketOffset(0, 10)}), "has no partitions, but lake bucket"),
    ],
)
def test_a_snapshot_naming_buckets_the_table_lacks_is_refused(coordinator: Coordinator, snapshot: LakeSnapshot, message: str) -> None:
    table_id = coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 2, LAKE))
    with pytest.raises(InvalidRequestError, match=message):
        coordinator.commit_lake_snapshot(table_id, snapshot)
    with pytest.raises(LakeSnapshotNotExistError):
        coordinator.lake_snapshot(table_id)


def test_a_table_without_a_lake_takes_no_snapshot(coordinator: Coordinator) -> None:
    table_id = coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 1))
    with pytest.raises(InvalidRequestError, match="shop.orders is not lake-enabled"):
        coordinator.commit_lake_snapshot(table_id, _snapshot(1, {0: 10}))


def test_the_lake_snapshot_survives_a_restart(tmpfs_path: Path, coordinator: Coordinator) -> None:
    table_id = coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 2, LAKE))
    coordinator.commit_lake_snapshot(table_id, LakeSnapshot(9, {0: LakeBucketOffset(0, 10, 1234), 1: LakeBucketOffset(3, 7)}))
    restarted = coordinator_on(tmpfs_path, RecordingTablets())
    assert restarted.lake_snapshot(table_id) == LakeSnapshot(9, {0: LakeBucketOffset(0, 10, 1234), 1: LakeBucketOffset(3, 7)})


# ---------------------------------------------------------------- writers and tiering jobs


def test_writer_ids_only_grow_and_each_token_proves_its_id_and_principal(tmpfs_path: Path, coordinator: Coordinator) -> None:
    first = coordinator.init_writer("alice")
    second = coordinator.init_writer("bob")
    assert second.writer_id > first.writer_id
    tokens = WriterTokens(coordinator.writer_key)
    tokens.check(first.writer_id, "alice", first.token, "test")
    with pytest.raises(UnknownWriterError, match="not issued to principal 'bob'"):
        tokens.check(first.writer_id, "bob", first.token, "test")
    restarted = coordinator_on(tmpfs_path, RecordingTablets())
    assert restarted.writer_key == coordinator.writer_key, "tokens issued before a restart stay valid"
    assert restarted.init_writer("alice").writer_id > second.writer_id


def test_tiering_jobs_are_kept_across_a_restart_and_a_heartbeat_needs_a_job_id(tmpfs_path: Path, coordinator: Coordinator) -> None:
    coordinator.tiering_heartbeat("job-1", (ORDERS,), barrier=42)
    with pytest.raises(InvalidRequestError, match="needs a job id"):
        coordinator.tiering_heartbeat("", (ORDERS,), barrier=1)
    [job] = coordinator_on(tmpfs_path, RecordingTablets()).tiering_jobs()
    assert (job.job_id, job.tables, job.last_barrier) == ("job-1", (ORDERS,), 42)


def test_a_heartbeat_from_a_server_that_never_registered_is_refused(coordinator: Coordinator) -> None:
    with pytest.raises(InvalidRequestError, match="tablet server 7 heartbeats but never registered"):
        coordinator.tablet_server_heartbeat(7)


# ---------------------------------------------------------------- replicas


@pytest.fixture
def replicated(tmpfs_path: Path, tablets: RecordingTablets) -> Coordinator:
    """Three servers, one table of three buckets with three copies each."""
    made = coordinator_on(tmpfs_path, tablets, replication_factor=3)
    made.create_database("shop")
    made.create_table(ORDERS, TableDescriptor(SCHEMA, 3))
    return made


def test_replicated_buckets_have_their_copies_on_distinct_servers_all_in_sync(replicated: Coordinator) -> None:
    assignment = replicated.assignment(replicated.table(ORDERS))
    for bucket, copies in assignment.replicas.items():
        assert sorted(copies.replicas) == [1, 2, 3] and copies.isr == copies.replicas
        assert assignment.leaders[bucket] == copies.replicas[0]
    assert sorted(assignment.leaders.values()) == [1, 2, 3], "one leadership per server"


def test_a_factor_above_the_servers_is_refused_naming_them(tmpfs_path: Path, tablets: RecordingTablets) -> None:
    coordinator = coordinator_on(tmpfs_path, tablets, servers=2)
    coordinator.create_database("shop")
    with pytest.raises(InvalidReplicationFactorError, match="replication factor 3 needs 3 live tablet servers, 2 are live"):
        coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 1, {"table.replication.factor": "3"}))


def test_the_leader_shrinks_the_isr_and_its_version_goes_up(replicated: Coordinator) -> None:
    info, copies, leader, follower = _first_bucket(replicated)
    updated = replicated.adjust_isr(leader, info.table_id, 0, copies.leader_epoch, copies.isr_version, [leader, copies.replicas[2]])
    assert updated == BucketReplicas(copies.replicas, (leader, copies.replicas[2]), copies.leader_epoch, copies.isr_version + 1)
    assert follower not in replicated.assignment(info).replicas[0].isr


def _first_bucket(replicated: Coordinator) -> tuple[TableInfo, BucketReplicas, int, int]:
    """Bucket 0 of the replicated table: its table, copies, leader and another replica."""
    info = replicated.table(ORDERS)
    copies = replicated.assignment(info).replicas[0]
    return info, copies, copies.replicas[0], copies.replicas[1]


def test_an_isr_change_from_a_stale_leader_or_version_is_refused(replicated: Coordinator) -> None:
    info, copies, leader, other = _first_bucket(replicated)
    with pytest.raises(NotLeaderError, match="is stale: the leader is"):
        replicated.adjust_isr(other, info.table_id, 0, copies.leader_epoch, copies.isr_version, [other])
    with pytest.raises(NotLeaderError, match="is stale"):
        replicated.adjust_isr(leader, info.table_id, 0, copies.leader_epoch, copies.isr_version + 5, [leader])
    assert replicated.assignment(info).replicas[0] == copies


def test_an_isr_without_its_leader_or_with_strangers_is_refused(replicated: Coordinator) -> None:
    info, copies, leader, other = _first_bucket(replicated)
    with pytest.raises(InvalidRequestError, match="must hold the leader"):
        replicated.adjust_isr(leader, info.table_id, 0, copies.leader_epoch, copies.isr_version, [other])
    with pytest.raises(InvalidRequestError, match="must hold the leader"):
        replicated.adjust_isr(leader, info.table_id, 0, copies.leader_epoch, copies.isr_version, [leader, 99])


def _on_a_clock(coordinator: Coordinator, clock: FakeClock) -> None:
    """The coordinator's liveness (a 10 s timeout) judged on ``clock``, every server heard from now."""
    coordinator.liveness = TabletLiveness(10_000, [1, 2, 3], clock=lambda: clock.now / 1000)


def _silence(coordinator: Coordinator, lost: int) -> None:
    """Every server but ``lost`` heartbeats; the next liveness check, past the timeout, finds ``lost`` gone."""
    clock = FakeClock(0)
    _on_a_clock(coordinator, clock)
    clock.now = 5_000
    for server_id in {1, 2, 3} - {lost}:
        coordinator.tablet_server_heartbeat(server_id)
    clock.now = 12_000
    coordinator.check_liveness()


def test_a_silent_leader_loses_its_buckets_to_the_next_in_sync_copy_under_a_new_epoch(
    replicated: Coordinator, tablets: RecordingTablets
) -> None:
    info = replicated.table(ORDERS)
    before = replicated.assignment(info)
    lost = before.leaders[0]
    _silence(replicated, lost)
    after = replicated.assignment(info)
    assert lost not in after.leaders.values()
    for bucket, copies in after.replicas.items():
        assert lost not in copies.isr
        if before.leaders[bucket] == lost:
            assert after.leaders[bucket] == next(r for r in before.replicas[bucket].replicas if r != lost)
            assert copies.leader_epoch == before.replicas[bucket].leader_epoch + 1
    assert replicated.offline_buckets() == 0
    survivors = {1, 2, 3} - {lost}
    wait_until(lambda: all(tablets.leaders_told(s).get(info.table_id) == after.leaders for s in survivors), "the survivors are told")


def test_a_server_a_leadership_change_did_not_reach_is_told_again_on_the_next_liveness_check(
    replicated: Coordinator, tablets: RecordingTablets
) -> None:
    info = replicated.table(ORDERS)
    lost = replicated.assignment(info).leaders[0]
    heir = next(r for r in replicated.assignment(info).replicas[0].replicas if r != lost)
    tablets.refuse[heir] = NetworkError(f"tablet server {heir}: the channel is still backing off")
    _silence(replicated, lost)
    after = replicated.assignment(info)
    assert after.leaders[0] == heir
    wait_until(lambda: tablets.leaders_told(heir).get(info.table_id) == after.leaders, "the heir was sent its leadership (and refused it)")

    del tablets.refuse[heir]
    mark = len(tablets.told)

    def told_again() -> bool:
        replicated.check_liveness()
        return any(
            t.server_id == heir and any(a.info.table_id == info.table_id and a.leaders == after.leaders for a in t.tables)
            for t in tablets.told[mark:]
        )

    wait_until(told_again, "the heir is told its buckets again once its channel works")


def test_buckets_whose_only_in_sync_copy_went_silent_are_counted_offline(tmpfs_path: Path, tablets: RecordingTablets) -> None:
    coordinator = coordinator_on(tmpfs_path, tablets)
    coordinator.create_database("shop")
    coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 3))
    clock = FakeClock(0)
    _on_a_clock(coordinator, clock)
    clock.now = 11_000
    coordinator.tablet_server_heartbeat(2)
    coordinator.tablet_server_heartbeat(3)
    coordinator.check_liveness()
    leaders = coordinator.assignment(coordinator.table(ORDERS)).leaders
    assert coordinator.offline_buckets() == sum(1 for leader in leaders.values() if leader == 1) == 1
    assert coordinator.liveness.states() == {1: False, 2: True, 3: True}


def test_a_restarted_server_leaves_every_isr_and_a_sole_copy_keeps_its_bucket_under_a_new_epoch(tmpfs_path: Path, tablets: RecordingTablets) -> None:
    coordinator = coordinator_on(tmpfs_path, tablets, replication_factor=2, servers=2)
    coordinator.create_database("shop")
    coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 1))
    info = coordinator.table(ORDERS)
    copies = coordinator.assignment(info).replicas[0]
    leader, follower = copies.replicas
    coordinator.adjust_isr(leader, info.table_id, 0, copies.leader_epoch, copies.isr_version, [leader])
    coordinator.register_tablet_server(ServerNode(leader, "tablet", 9000 + leader))
    after = coordinator.assignment(info)
    assert after.leaders[0] == leader
    assert after.replicas[0].isr == (leader,) and after.replicas[0].leader_epoch == copies.leader_epoch + 1
    assert follower in after.replicas[0].replicas
