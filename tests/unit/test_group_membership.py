"""The member side of a consumer group, against the coordinator's group logic in-process (no gRPC):
joining on its heartbeat thread, taking answers, being lost (the coordinator restarted, or it could
not heartbeat for a whole session) and joining again, and leaving on close."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

import pytest

from lakelog.client.group.group_membership import GroupMembership
from lakelog.consumer_groups import GroupBucket, HeartbeatAnswer
from lakelog.errors import NetworkError
from lakelog.metadata import TablePath
from lakelog.server.coordinator.groups.group_coordinator import GroupCoordinator
from lakelog.server.coordinator.groups.group_offset_store import GroupOffsetStore
from tests.harness.waiting import wait_until

TABLE = 3
BUCKETS = [GroupBucket(TABLE, 0, b) for b in range(4)]


class Coordinator:
    """The member's seam: calls straight into a :class:`GroupCoordinator`, or failing as an
    unreachable one does."""

    def __init__(self, path: Path, clock: Callable[[], float]) -> None:
        self.path = path
        self.clock = clock
        self.unreachable = False
        self.restart()

    def restart(self) -> None:
        """A new coordinator on the same offsets file: memberships gone, commits kept."""
        self.groups = GroupCoordinator(GroupOffsetStore(self.path), lambda t: BUCKETS, lambda t: {}, lambda t: TablePath("db", "t"), self.clock)

    def heartbeat(
        self, group_id: str, member_id: str, member_epoch: int, table_id: int, session_timeout_ms: int, owned: Iterable[GroupBucket], client_id: str
    ) -> HeartbeatAnswer:
        if self.unreachable:
            raise NetworkError("coordinator unreachable")
        return self.groups.heartbeat(group_id, member_id, member_epoch, table_id, session_timeout_ms, owned, client_id)

    def commit(self, group_id: str, member_id: str, member_epoch: int, table_id: int, offsets: dict[GroupBucket, int]) -> None:
        self.groups.commit(group_id, member_id, table_id, offsets)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def coordinator(tmp_path: Path, clock: Clock) -> Coordinator:
    return Coordinator(tmp_path / "groups.db", clock)


def taken(member: GroupMembership) -> tuple[frozenset[GroupBucket], bool]:
    wait_until(member.changed, "an answer")
    return member.take()


def test_a_member_joins_reads_what_it_is_given_commits_and_leaves(coordinator: Coordinator) -> None:
    member = GroupMembership(coordinator, "g", TABLE, 3000).start()
    assigned, lost = taken(member)
    assert assigned == frozenset(BUCKETS) and not lost
    member.owned(assigned)
    member.commit({BUCKETS[0]: 7})
    assert coordinator.groups.offsets("g", TABLE) == {BUCKETS[0]: 7}
    member.close()
    assert coordinator.groups.describe("g").members == ()


def test_a_restarted_coordinator_makes_the_member_lost_and_it_joins_again(coordinator: Coordinator) -> None:
    member = GroupMembership(coordinator, "g", TABLE, 3000).start()
    assigned, _ = taken(member)
    member.owned(assigned)
    first_id = member.member_id
    coordinator.restart()
    wait_until(lambda: member.member_id not in ("", first_id), "joined again with a new id")
    assigned, lost = member.take()
    assert lost, "the scanner is told to drop every bucket, uncommitted, before it reads what it holds now"
    assert assigned == frozenset(BUCKETS)
    member.close()


def test_a_member_that_cannot_heartbeat_for_a_whole_session_is_lost(coordinator: Coordinator, clock: Clock) -> None:
    member = GroupMembership(coordinator, "g", TABLE, 3000, clock=clock).start()
    assigned, _ = taken(member)
    member.owned(assigned)
    coordinator.unreachable = True
    member.heartbeat()
    assert not member.changed(), "one failed heartbeat within the session changes nothing"
    clock.now += 3.5
    member.heartbeat()
    assert member.take() == (frozenset(), True)
    coordinator.groups.expire()  # the coordinator, on the same clock, expired it too
    coordinator.unreachable = False
    assigned, lost = taken(member)
    assert assigned == frozenset(BUCKETS) and not lost
    member.close()
