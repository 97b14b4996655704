"""One consumer group's members and who may read which bucket, in the manner of Kafka's consumer
protocol (KIP-848).

Each member heartbeats with the buckets it reads now. The group keeps a target assignment (from
:func:`assign_buckets`, recomputed when a member comes or goes or a table's buckets change) and
moves each member towards it one heartbeat at a time: a bucket leaves a member's answer as soon as
the target takes it away, but is given to its next holder only once the old holder's heartbeat no
longer reports it, which the old holder sends only after committing it. So no two members ever
read one bucket, and the next holder starts where the last one committed. A member's epoch grows
with every change of its answer; a heartbeat with another epoch missed an answer and is fenced.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from lakelog.consumer_groups import GroupBucket, HeartbeatAnswer
from lakelog.errors import FencedMemberError, InvalidRequestError, UnknownMemberError
from lakelog.server.coordinator.groups.bucket_assignor import assign_buckets

log = logging.getLogger(__name__)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
# The longest session a member may ask for (the client's key has the same bound): a member that
# stops silently keeps its buckets from the others at most this long.
MAX_SESSION_TIMEOUT_MS = 30 * 60_000


@dataclass
class Member:
    member_id: str
    client_id: str
    table_id: int
    session_timeout_s: float
    last_seen: float
    epoch: int = 1  # above JOIN_EPOCH from the start: a member's next heartbeat is never a join
    # Granted and not yet reported given up: no other member may be granted these.
    held: set[GroupBucket] = field(default_factory=set)
    answered: frozenset[GroupBucket] = frozenset()


class ConsumerGroup:
    def __init__(self, group_id: str, clock: Callable[[], float]) -> None:
        self.group_id = group_id
        self._clock = clock
        self.epoch = 0
        self.members: dict[str, Member] = {}
        self._targets: dict[str, set[GroupBucket]] = {}
        self._buckets: dict[int, tuple[GroupBucket, ...]] = {}

    def heartbeat(
        self,
        member_id: str,
        member_epoch: int,
        table_id: int,
        session_timeout_ms: int,
        owned: Iterable[GroupBucket],
        client_id: str,
        buckets: Sequence[GroupBucket],
    ) -> HeartbeatAnswer:
        """``buckets``: every bucket of the member's table now (new partitions' included)."""
        if member_epoch < LEAVE_EPOCH:
            raise InvalidRequestError(f"group {self.group_id}: member epoch {member_epoch} (0 joins, -1 leaves, else the last answer's)")
        if member_epoch == LEAVE_EPOCH:
            self._remove(member_id, "left")
            return HeartbeatAnswer(member_id, LEAVE_EPOCH, frozenset())
        if not 0 < session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            raise InvalidRequestError(f"group {self.group_id}: session timeout {session_timeout_ms} ms is not within 1 ms .. {MAX_SESSION_TIMEOUT_MS} ms")
        if member_epoch == JOIN_EPOCH:
            member = self._join(table_id, session_timeout_ms, client_id)
        else:
            member = self._known(member_id, member_epoch)
            if member.table_id != table_id:
                raise InvalidRequestError(f"group {self.group_id}: member {member_id} reads table {member.table_id}, not {table_id}")
        member.last_seen = self._clock()
        member.session_timeout_s = session_timeout_ms / 1000
        if self._buckets.get(table_id) != tuple(buckets):
            self._buckets[table_id] = tuple(buckets)
            self._retarget(f"table {table_id} has {len(buckets)} buckets")
        return self._reconcile(member, set(owned))

    def _join(self, table_id: int, session_timeout_ms: int, client_id: str) -> Member:
        member = Member(uuid.uuid4().hex, client_id, table_id, session_timeout_ms / 1000, self._clock())
        self.members[member.member_id] = member
        log.info("group %s: member %s (%s) joined for table %d", self.group_id, member.member_id, client_id or "no client id", table_id)
        self._retarget(f"member {member.member_id} joined")
        return member

    def _known(self, member_id: str, member_epoch: int) -> Member:
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMemberError(f"group {self.group_id} has no member {member_id!r} (its session expired, or the coordinator restarted): join again")
        if member_epoch != member.epoch:
            self._remove(member_id, f"fenced: it sent epoch {member_epoch}, its epoch is {member.epoch}")
            raise FencedMemberError(f"group {self.group_id}: member {member_id} sent epoch {member_epoch}, its epoch is {member.epoch}: join again")
        return member

    def _reconcile(self, member: Member, owned: set[GroupBucket]) -> HeartbeatAnswer:
        target = self._targets.get(member.member_id, set())
        # Given up: out of the target and no longer read (the member committed it first).
        member.held = {b for b in member.held if b in target or b in owned}
        taken = {b for other in self.members.values() if other is not member for b in other.held}
        member.held |= {b for b in target if b not in taken}
        answer = frozenset(member.held & target)
        if answer != member.answered:
            member.answered = answer
            member.epoch += 1
        # Waiting for buckets another member still gives up. A member giving buckets up needs no
        # hint: its scanner wakes its heartbeat as soon as it let them go.
        return HeartbeatAnswer(member.member_id, member.epoch, answer, answer != target)

    def check_commit(self, member_id: str, table_id: int, buckets: Iterable[GroupBucket]) -> None:
        """A member commits only buckets it holds (one it gives up included: it commits before)."""
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMemberError(f"group {self.group_id} has no member {member_id!r}: its commit is refused")
        stray = sorted(b for b in buckets if b not in member.held or b.table_id != table_id)
        if stray:
            raise FencedMemberError(f"group {self.group_id}: member {member_id} does not hold {', '.join(map(str, stray))}: its commit is refused")

    def expire(self) -> None:
        """Remove the members silent longer than their session timeout; their buckets go to the others."""
        now = self._clock()
        for member in list(self.members.values()):
            if now - member.last_seen > member.session_timeout_s:
                self._remove(member.member_id, f"its session expired (no heartbeat for {now - member.last_seen:.1f} s)")

    def _remove(self, member_id: str, why: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        log.info("group %s: member %s %s; its %d bucket(s) go to the others", self.group_id, member_id, why, len(member.held))
        self._retarget(f"member {member_id} left")

    def _retarget(self, why: str) -> None:
        self.epoch += 1
        self._targets = {}
        for table_id in {member.table_id for member in self.members.values()}:
            readers = {m.member_id: m.held for m in self.members.values() if m.table_id == table_id}
            self._targets.update(assign_buckets(self._buckets.get(table_id, ()), readers))
        log.info("group %s: epoch %d (%s)", self.group_id, self.epoch, why)

    def holder(self, bucket: GroupBucket) -> str | None:
        """The member that may read ``bucket`` now (None: nobody)."""
        return next((m.member_id for m in self.members.values() if bucket in m.answered), None)
