"""The member side of a consumer group: a thread that heartbeats the coordinator with the buckets
the scanner reads and keeps the latest answer (the buckets it may read).

The scanner acts on answers in its own polls (:class:`GroupLogScanner`): it commits and lets go
of what was taken away, then says what it reads now (:meth:`owned`), and the membership heartbeats
at once so the coordinator can hand those buckets on. A member the coordinator no longer knows, or
fenced, or that could not heartbeat for a whole session (the coordinator has surely given its
buckets away), is *lost*: the scanner drops every bucket without committing, and the membership
joins again with a new id.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Callable, Iterable, Protocol

from lakelog.consumer_groups import GroupBucket, HeartbeatAnswer
from lakelog.errors import FencedMemberError, LakelogError, UnknownMemberError

log = logging.getLogger(__name__)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
# A member heartbeats every third of its session, and at least this often.
MAX_HEARTBEAT_INTERVAL_S = 1.0
# While buckets of its target are still being given up by others (the coordinator says it is
# reconciling), this often: a bucket given up reaches its next holder within it.
RECONCILING_INTERVAL_S = 0.05


class GroupCalls(Protocol):
    """The coordinator calls a member makes (gRPC in production)."""

    def heartbeat(
        self, group_id: str, member_id: str, member_epoch: int, table_id: int, session_timeout_ms: int, owned: Iterable[GroupBucket], client_id: str
    ) -> HeartbeatAnswer: ...

    def commit(self, group_id: str, member_id: str, member_epoch: int, table_id: int, offsets: dict[GroupBucket, int]) -> None: ...


def client_id() -> str:
    """Who a member is, as describe shows it: host and process."""
    return f"{socket.gethostname()}/{os.getpid()}"


class GroupMembership:
    def __init__(
        self, calls: GroupCalls, group_id: str, table_id: int, session_timeout_ms: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.group_id = group_id
        self._calls = calls
        self._table_id = table_id
        self._session_ms = session_timeout_ms
        self._interval_s = min(session_timeout_ms / 3000, MAX_HEARTBEAT_INTERVAL_S)
        self._clock = clock
        self._client_id = client_id()
        self._lock = threading.Lock()
        self._member_id = ""
        self._epoch = JOIN_EPOCH
        self._owned: frozenset[GroupBucket] = frozenset()
        self._assigned: frozenset[GroupBucket] = frozenset()
        self._answers = 0  # grows with every answer and every loss: the scanner looks again when it changed
        self._seen_answers = 0
        self._lost = False
        self._last_ok = clock()
        self._reconciling = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"group-{group_id}-heartbeat", daemon=True)

    def start(self) -> "GroupMembership":
        """Join, on the heartbeat thread: creating a scanner never waits for the coordinator."""
        self._wake.set()
        self._thread.start()
        return self

    @property
    def member_id(self) -> str:
        return self._member_id

    def changed(self) -> bool:
        """An answer or a loss came since the scanner last took one (:meth:`take`)."""
        return self._answers != self._seen_answers

    def take(self) -> tuple[frozenset[GroupBucket], bool]:
        """The buckets the member may read now, and whether it was lost since the last take."""
        with self._lock:
            self._seen_answers = self._answers
            lost, self._lost = self._lost, False
            return self._assigned, lost

    def owned(self, buckets: Iterable[GroupBucket]) -> None:
        """What the scanner reads now; a change is told to the coordinator at once."""
        owned = frozenset(buckets)
        with self._lock:
            changed, self._owned = owned != self._owned, owned
        if changed:
            self._wake.set()

    def commit(self, offsets: dict[GroupBucket, int]) -> None:
        """Store ``offsets`` on the coordinator (raises what it refused)."""
        if offsets:
            self._calls.commit(self.group_id, self._member_id, self._epoch, self._table_id, offsets)

    def heartbeat(self) -> None:
        """One heartbeat (a join when the member has no id); failures are counted against the session."""
        with self._lock:
            member_id, epoch, owned = self._member_id, self._epoch, self._owned
        try:
            answer = self._calls.heartbeat(self.group_id, member_id, epoch, self._table_id, self._session_ms, owned, self._client_id)
        except (UnknownMemberError, FencedMemberError) as error:
            self._lose(f"{error.message}")
            return
        except LakelogError as error:
            silent_s = self._clock() - self._last_ok
            if silent_s * 1000 > self._session_ms and self._member_id:
                self._lose(f"no heartbeat reached the coordinator for {silent_s:.1f} s ({error.message})")
            else:
                log.warning("group %s: heartbeat failed, trying again: %s", self.group_id, error.message)
            return
        with self._lock:
            self._last_ok = self._clock()
            if not self._member_id:
                log.info("group %s: joined as member %s", self.group_id, answer.member_id)
            self._member_id, self._epoch = answer.member_id, answer.member_epoch
            self._reconciling = answer.reconciling
            if answer.assigned != self._assigned:
                self._assigned = answer.assigned
                self._answers += 1

    def _lose(self, why: str) -> None:
        log.warning("group %s: member %s lost its buckets, joining again: %s", self.group_id, self._member_id or "(none)", why)
        with self._lock:
            self._member_id, self._epoch = "", JOIN_EPOCH
            self._assigned, self._owned = frozenset(), frozenset()
            self._lost = True
            self._answers += 1
            self._last_ok = self._clock()
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(RECONCILING_INTERVAL_S if self._reconciling else self._interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            self.heartbeat()

    def close(self) -> None:
        """Stop heartbeating and leave the group: its buckets go to the others at once."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
        if not self._member_id:
            return
        try:
            self._calls.heartbeat(self.group_id, self._member_id, LEAVE_EPOCH, self._table_id, self._session_ms, (), self._client_id)
            log.info("group %s: member %s left", self.group_id, self._member_id)
        except LakelogError as error:
            log.warning("group %s: member %s could not say it leaves (its session will expire): %s", self.group_id, self._member_id, error.message)
        self._member_id = ""
