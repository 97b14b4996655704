"""A consumer group on the coordinator, without gRPC: membership, incremental moves (a bucket goes
to its next holder only once the last one gave it up), fencing, expiry, commits and resets against
a real offset store."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakelog.consumer_groups import GroupBucket
from lakelog.errors import FencedMemberError, GroupNotEmptyError, InvalidNameError, InvalidRequestError, UnknownMemberError
from lakelog.metadata import TablePath
from lakelog.server.coordinator.groups.group_coordinator import GroupCoordinator
from lakelog.server.coordinator.groups.group_offset_store import GroupOffsetStore

TABLE = 7
SESSION_MS = 3000


class Tables:
    """The coordinator's tables as the groups see them: a table's buckets and high watermarks."""

    def __init__(self, buckets: int) -> None:
        self.buckets = [GroupBucket(TABLE, 0, b) for b in range(buckets)]
        self.marks = {b: 100 for b in self.buckets}

    def of(self, table_id: int) -> list[GroupBucket]:
        return list(self.buckets)

    def high_watermarks(self, table_id: int) -> dict[GroupBucket, int]:
        return dict(self.marks)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Member:
    """A member as a client runs it: heartbeats with what it reads, acts on each answer."""

    def __init__(self, groups: GroupCoordinator, group: str = "g") -> None:
        self.groups, self.group = groups, group
        self.member_id, self.epoch = "", 0
        self.owned: set[GroupBucket] = set()

    def beat(self) -> set[GroupBucket]:
        answer = self.groups.heartbeat(self.group, self.member_id, self.epoch, TABLE, SESSION_MS, self.owned, "test")
        self.member_id, self.epoch = answer.member_id, answer.member_epoch
        self.owned = set(answer.assigned)  # gives up at once what was taken away
        return self.owned

    def commit(self, offsets: dict[GroupBucket, int]) -> None:
        self.groups.commit(self.group, self.member_id, TABLE, offsets)


@pytest.fixture
def store(tmp_path: Path) -> GroupOffsetStore:
    return GroupOffsetStore(tmp_path / "groups.db")


def coordinator(store: GroupOffsetStore, tables: Tables, clock: Clock) -> GroupCoordinator:
    return GroupCoordinator(store, tables.of, tables.high_watermarks, lambda table_id: TablePath("db", "t"), clock)


def settle(members: list[Member], rounds: int = 4) -> None:
    for _ in range(rounds):
        for member in members:
            member.beat()


def test_three_members_share_six_buckets_exactly(store: GroupOffsetStore) -> None:
    tables = Tables(6)
    groups = coordinator(store, tables, Clock())
    members = [Member(groups) for _ in range(3)]
    settle(members)
    held = [b for m in members for b in m.owned]
    assert sorted(held) == tables.buckets
    assert [len(m.owned) for m in members] == [2, 2, 2]


def test_a_bucket_moves_only_after_its_holder_gave_it_up(store: GroupOffsetStore) -> None:
    tables = Tables(2)
    groups = coordinator(store, tables, Clock())
    first = Member(groups)
    first.beat()
    assert first.owned == set(tables.buckets)
    second = Member(groups)
    assert second.beat() == set(), "the first member has not given anything up yet"
    before = set(first.owned)
    first.beat()  # the answer takes one bucket away; first stops reading it
    taken = before - first.owned
    assert len(taken) == 1
    assert second.beat() == set(), "first has not said yet that it stopped reading it"
    waiting = groups.heartbeat("g", second.member_id, second.epoch, TABLE, SESSION_MS, second.owned, "test")
    assert waiting.reconciling, "second is told to heartbeat again soon"
    first.beat()  # says so
    assert second.beat() == taken
    settled = groups.heartbeat("g", second.member_id, second.epoch, TABLE, SESSION_MS, second.owned, "test")
    assert not settled.reconciling


def test_a_member_still_reporting_a_bucket_keeps_it_from_others(store: GroupOffsetStore) -> None:
    tables = Tables(2)
    groups = coordinator(store, tables, Clock())
    first = Member(groups)
    first.beat()
    second = Member(groups)
    second.beat()
    stubborn = set(first.owned)
    answer = groups.heartbeat("g", first.member_id, first.epoch, TABLE, SESSION_MS, stubborn, "test")
    first.epoch = answer.member_epoch
    # first's answer drops a bucket, but its heartbeat below still reports it: not handed on.
    groups.heartbeat("g", first.member_id, first.epoch, TABLE, SESSION_MS, stubborn, "test")
    assert second.beat() == set()
    first.commit({b: 5 for b in stubborn})  # a bucket being given up may still be committed


def test_silent_member_expires_and_its_buckets_go_to_the_others(store: GroupOffsetStore) -> None:
    tables, clock = Tables(6), Clock()
    groups = coordinator(store, tables, clock)
    members = [Member(groups) for _ in range(3)]
    settle(members)
    dead = members.pop()
    clock.now += SESSION_MS / 1000 + 0.1
    settle(members)  # the live ones heartbeat: their sessions go on
    groups.expire()
    settle(members)
    assert sorted(b for m in members for b in m.owned) == tables.buckets
    with pytest.raises(UnknownMemberError):
        dead.beat()
    with pytest.raises(UnknownMemberError):
        dead.commit({tables.buckets[0]: 1})


def test_stale_epoch_is_fenced_and_frees_the_buckets(store: GroupOffsetStore) -> None:
    tables = Tables(2)
    groups = coordinator(store, tables, Clock())
    first = Member(groups)
    first.beat()
    with pytest.raises(FencedMemberError):
        groups.heartbeat("g", first.member_id, first.epoch + 5, TABLE, SESSION_MS, first.owned, "test")
    other = Member(groups)
    assert other.beat() == set(tables.buckets)


def test_commit_of_a_bucket_not_held_is_refused(store: GroupOffsetStore) -> None:
    tables = Tables(4)
    groups = coordinator(store, tables, Clock())
    a, b = Member(groups), Member(groups)
    settle([a, b])
    foreign = next(iter(b.owned))
    with pytest.raises(FencedMemberError, match="does not hold"):
        a.commit({foreign: 3})
    assert groups.offsets("g", TABLE) == {}


def test_commits_survive_a_restart_and_lag_counts_from_them(tmp_path: Path) -> None:
    tables = Tables(2)
    store = GroupOffsetStore(tmp_path / "groups.db")
    groups = coordinator(store, tables, Clock())
    member = Member(groups)
    member.beat()
    member.commit({tables.buckets[0]: 40})
    store.close()
    again = coordinator(GroupOffsetStore(tmp_path / "groups.db"), tables, Clock())
    assert again.offsets("g", TABLE) == {tables.buckets[0]: 40}
    described = again.describe("g")
    assert described.members == ()
    lags = {state.bucket: state.lag for state in described.buckets}
    assert lags == {tables.buckets[0]: 60, tables.buckets[1]: 100}, "a bucket without a commit counts from 0"
    assert [(s.group_id, s.members, s.lag) for s in again.list_groups()] == [("g", 0, 160)]
    member.groups = again  # the member heartbeats the restarted coordinator: it joins again
    with pytest.raises(UnknownMemberError):
        member.beat()


def test_reset_is_refused_while_members_live(store: GroupOffsetStore) -> None:
    tables = Tables(2)
    groups = coordinator(store, tables, Clock())
    member = Member(groups)
    member.beat()
    with pytest.raises(GroupNotEmptyError, match="1 live member"):
        groups.reset("g", TABLE, {tables.buckets[0]: 0})
    groups.heartbeat("g", member.member_id, -1, TABLE, SESSION_MS, (), "test")  # leaves
    groups.reset("g", TABLE, {tables.buckets[0]: 3})
    assert groups.offsets("g", TABLE) == {tables.buckets[0]: 3}


def test_new_buckets_of_a_table_are_shared_out(store: GroupOffsetStore) -> None:
    tables = Tables(2)
    groups = coordinator(store, tables, Clock())
    members = [Member(groups), Member(groups)]
    settle(members)
    tables.buckets += [GroupBucket(TABLE, 9, b) for b in range(2)]  # a partition was created
    settle(members)
    assert sorted(b for m in members for b in m.owned) == sorted(tables.buckets)


def test_bad_input_is_refused_naming_what(store: GroupOffsetStore) -> None:
    groups = coordinator(store, Tables(1), Clock())
    with pytest.raises(InvalidNameError, match="group"):
        groups.heartbeat("no/such", "", 0, TABLE, SESSION_MS, (), "test")
    for timeout_ms in (0, 31 * 60_000):
        with pytest.raises(InvalidRequestError, match="session timeout"):
            groups.heartbeat("g", "", 0, TABLE, timeout_ms, (), "test")
    with pytest.raises(InvalidRequestError, match="negative offset"):
        groups.reset("g", TABLE, {GroupBucket(TABLE, 0, 0): -1})
