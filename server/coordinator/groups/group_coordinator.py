"""Every consumer group of the cluster: heartbeats, commits, expiry and what admins ask.

Plain Python over three seams the coordinator fills in: a table's buckets now (every partition's),
their high watermarks (asked of the tablet servers) and a table's path. Membership lives in memory
(a restarted coordinator answers members :class:`UnknownMemberError` and they join again);
committed offsets live in the :class:`GroupOffsetStore`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Iterable, Mapping, Sequence

from lakelog.consumer_groups import (
    GroupBucket,
    GroupBucketState,
    GroupDescription,
    GroupMember,
    GroupSummary,
    HeartbeatAnswer,
    bucket_lag,
)
from lakelog.errors import GroupNotEmptyError, InvalidRequestError, LakelogError, UnknownMemberError
from lakelog.metadata import TablePath, validate_name
from lakelog.server.coordinator.groups.consumer_group import LEAVE_EPOCH, ConsumerGroup
from lakelog.server.coordinator.groups.group_offset_store import GroupOffsetStore

log = logging.getLogger(__name__)

TableBuckets = Callable[[int], Sequence[GroupBucket]]
HighWatermarks = Callable[[int], Mapping[GroupBucket, int]]


class GroupCoordinator:
    def __init__(
        self,
        offsets: GroupOffsetStore,
        table_buckets: TableBuckets,
        high_watermarks: HighWatermarks,
        table_path: Callable[[int], TablePath],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``table_buckets(table_id)``: sorted; ``high_watermarks(table_id)``: those whose leader answered."""
        self._offsets = offsets
        self._table_buckets = table_buckets
        self._high_watermarks = high_watermarks
        self._table_path = table_path
        self._clock = clock
        self._groups: dict[str, ConsumerGroup] = {}
        self._lock = threading.Lock()

    def heartbeat(
        self, group_id: str, member_id: str, member_epoch: int, table_id: int, session_timeout_ms: int, owned: Iterable[GroupBucket], client_id: str
    ) -> HeartbeatAnswer:
        validate_name("group", group_id)
        buckets = self._table_buckets(table_id) if member_epoch != LEAVE_EPOCH else ()
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                group = self._groups[group_id] = ConsumerGroup(group_id, self._clock)
            return group.heartbeat(member_id, member_epoch, table_id, session_timeout_ms, owned, client_id, buckets)

    def commit(self, group_id: str, member_id: str, table_id: int, offsets: Mapping[GroupBucket, int]) -> None:
        """Store a member's next offsets; refused for buckets it does not hold (it was fenced, or
        its session expired: another member may read them now)."""
        _check_offsets(group_id, offsets)
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                raise UnknownMemberError(f"group {group_id} has no member {member_id!r}: its commit is refused")
            group.check_commit(member_id, table_id, offsets)
            self._offsets.commit(group_id, offsets)

    def expire(self) -> None:
        """Expire silent members; a group left without members is forgotten (its commits stay)."""
        with self._lock:
            for group in self._groups.values():
                group.expire()
            self._groups = {name: group for name, group in self._groups.items() if group.members}

    def list_groups(self) -> list[GroupSummary]:
        """Every group with members or committed offsets, by name, with its lag."""
        with self._lock:
            live = {name: len(group.members) for name, group in self._groups.items()}
        names = sorted(set(self._offsets.groups()) | {name for name, count in live.items() if count})
        return [GroupSummary(name, live.get(name, 0), self.describe(name).lag) for name in names]

    def describe(self, group_id: str) -> GroupDescription:
        """Members and their buckets; per bucket of every table the group reads or committed,
        its committed offset, high watermark, lag and reader."""
        validate_name("group", group_id)
        committed = self._offsets.offsets(group_id)
        with self._lock:
            group = self._groups.get(group_id)
            epoch = group.epoch if group else 0
            members = list(group.members.values()) if group else []
            holders = {b: m.member_id for m in members for b in m.answered}
        tables = sorted({m.table_id for m in members} | {b.table_id for b in committed})
        paths: dict[int, TablePath] = {}
        states: list[GroupBucketState] = []
        for table_id in tables:
            try:
                path = paths[table_id] = self._table_path(table_id)
                buckets = set(self._table_buckets(table_id))
                marks = self._high_watermarks(table_id)
            except LakelogError as error:  # dropped since: its commits are shown without a table
                log.info("group %s: table %d is left out of its description: %s", group_id, table_id, error)
                continue
            for bucket in sorted(buckets | {b for b in committed if b.table_id == table_id}):
                done, mark = committed.get(bucket), marks.get(bucket)
                states.append(GroupBucketState(path, bucket, done, mark, bucket_lag(done, mark), holders.get(bucket)))
        described = tuple(
            GroupMember(m.member_id, m.epoch, m.client_id, m.table_id, paths[m.table_id], tuple(sorted(m.answered))) for m in members if m.table_id in paths
        )
        return GroupDescription(group_id, epoch, described, tuple(states))

    def offsets(self, group_id: str, table_id: int) -> dict[GroupBucket, int]:
        validate_name("group", group_id)
        return self._offsets.offsets(group_id, table_id)

    def reset(self, group_id: str, table_id: int, offsets: Mapping[GroupBucket, int]) -> None:
        """Set committed offsets by hand; refused while the group has members."""
        _check_offsets(group_id, offsets)
        stray = sorted(b for b in offsets if b.table_id != table_id)
        if stray:
            raise InvalidRequestError(f"group {group_id}: a reset of table {table_id} names buckets of other tables: {', '.join(map(str, stray))}")
        with self._lock:
            group = self._groups.get(group_id)
            if group is not None and group.members:
                raise GroupNotEmptyError(
                    f"group {group_id} has {len(group.members)} live member(s): its offsets are reset only once they are gone"
                )
            self._offsets.commit(group_id, offsets)
        log.info("group %s: offsets of table %d reset: %s", group_id, table_id, {str(b): o for b, o in sorted(offsets.items())})


def _check_offsets(group_id: str, offsets: Mapping[GroupBucket, int]) -> None:
    validate_name("group", group_id)
    negative = sorted(str(b) for b, offset in offsets.items() if offset < 0)
    if negative:
        raise InvalidRequestError(f"group {group_id}: negative offset for {', '.join(negative)}")
