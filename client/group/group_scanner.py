"""The scanner of a consumer group member: ``create_log_scanner(group="name")``.

Its buckets come from the group (:class:`GroupMembership`), never from ``subscribe``. Each poll
first acts on the group's latest answer, on the polling thread, so a bucket is let go only between
polls: with auto-commit it commits what earlier polls returned (every poll does), then lets go of
the buckets taken away, then starts the new ones at the group's committed offsets. A bucket with
no commit, or whose committed offset no tier holds any more, starts by
``client.scanner.group.reset`` (logged). A lost member drops every bucket without committing: the
coordinator may have given them away already.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from lakelog.config import Configuration
from lakelog.consumer_groups import GroupBucket
from lakelog.errors import InvalidPartitionError, InvalidRequestError, LakelogError, OffsetOutOfRangeError
from lakelog.metadata import OffsetSpec, TableInfo
from lakelog.client.group.group_membership import GroupMembership
from lakelog.client.scanner.log_scanner import LogScanner
from lakelog.client.scanner.scan_records import ScanRecords
from lakelog.client.table_bucket import TableBucket

log = logging.getLogger(__name__)

class GroupLogScanner(LogScanner):
    def __init__(
        self,
        membership: Callable[[int], GroupMembership],
        committed: Callable[[], dict[GroupBucket, int]],
        conf: Configuration,
        info: TableInfo,
        *scanner_args: Any,
        **scanner_kwargs: Any,
    ) -> None:
        """``membership(table_id)`` joins the group; ``committed()``: the group's offsets of the
        table; ``info`` and the rest: the :class:`LogScanner`'s own (``conf`` among them)."""
        if info.partition_id is not None:
            raise InvalidPartitionError(f"a group reads a whole table: create its scanner on {info.path}, not on partition {info.partition_name}")
        super().__init__(info, *scanner_args, **scanner_kwargs)
        self._auto_commit: bool = conf.get("client.scanner.group.auto-commit")
        self._reset: str = conf.get("client.scanner.group.reset")
        self._committed_offsets = committed
        self._owned: set[GroupBucket] = set()
        self._last_commit: dict[GroupBucket, int] = {}
        self._returned = False  # a poll returned records not committed yet
        self._group = membership(self._info.table_id).start()

    @property
    def group_id(self) -> str:
        return self._group.group_id

    # the group decides the buckets

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise InvalidRequestError(f"a scanner of group {self._group.group_id} reads the buckets the group gives it: it does not subscribe")

    subscribe = subscribe_partition = subscribe_from_beginning = subscribe_from_timestamp = subscribe_buckets = seek_to_end = unsubscribe = _refuse

    def _subscribe_held(self, partition_id: int, bucket: int, offset: int) -> None:
        """Read a bucket the group gave this member from ``offset`` (partition 0: none)."""
        if partition_id:
            LogScanner.subscribe_partition(self, partition_id, bucket, offset)
        else:
            LogScanner.subscribe(self, bucket, offset)

    def _seek(self, key: object, offset: int) -> None:
        """A read to the end sets a held bucket back to where it stopped."""
        partition_id, bucket = key if isinstance(key, tuple) else (0, key)
        self._subscribe_held(partition_id, bucket, offset)

    def check_subscribed(self) -> None:
        """A member may hold no bucket for now (more members than buckets): its polls wait."""

    def discovery_due(self) -> bool:
        return (self._auto_commit and self._returned) or self._group.changed()

    def discover(self) -> None:
        if self._auto_commit and self._returned:
            self._commit_quietly()
        if self._group.changed():
            self._reconcile()

    def collect(self, limit: int) -> ScanRecords:
        records = super().collect(limit)
        if records:
            self._returned = True
        return records

    # commits

    def commit(self) -> None:
        """Store on the coordinator the next offset of every bucket this member's polls returned."""
        self._returned = False
        offsets = self._positions_to_commit()
        self._group.commit(offsets)
        self._last_commit.update(offsets)

    def _commit_quietly(self) -> None:
        """Auto-commit: a refusal (the member was fenced, or lost) or an unreachable coordinator is
        logged; the next holder reads again what this member read since its last commit."""
        try:
            self.commit()
        except LakelogError as error:
            log.warning("group %s: commit failed: %s", self._group.group_id, error.message)

    def _positions_to_commit(self, only: set[GroupBucket] | None = None) -> dict[GroupBucket, int]:
        with self._buffer.cond:
            positions = dict(self._buffer.positions)
        offsets = {}
        for key in self._owned if only is None else only:
            position = positions.get(self._table_bucket_of(key))
            if position is not None and self._last_commit.get(key) != position:
                offsets[key] = position
        return offsets

    def _table_bucket_of(self, key: GroupBucket) -> TableBucket:
        return TableBucket(self._info.table_id, key.partition_id or None, key.bucket)

    # acting on the group's answer

    def _reconcile(self) -> None:
        assigned, lost = self._group.take()
        if lost:
            for key in self._owned:
                self._drop(self._table_bucket_of(key))
            log.info("group %s: %d bucket(s) dropped uncommitted, the member was lost", self._group.group_id, len(self._owned))
            self._owned = set()
        revoked = self._owned - assigned
        if revoked:
            if self._auto_commit:
                self._group.commit(self._positions_to_commit(revoked))
            for key in revoked:
                self._drop(self._table_bucket_of(key))
            self._owned -= revoked
            log.info("group %s: gave up %s", self._group.group_id, _names(revoked))
        added = assigned - self._owned
        if added:
            self._start(added)
        self._group.owned(self._owned)

    def _start(self, added: set[GroupBucket]) -> None:
        """Start each bucket at its committed offset when a tier still holds it, else by the reset
        policy (logged)."""
        committed = self._committed_offsets()
        earliest, latest = self._bounds(added)
        starts: dict[GroupBucket, int] = {}
        for key in sorted(added):
            offset = committed.get(key)
            if offset is not None and earliest[key] <= offset <= latest[key]:
                starts[key] = offset
                continue
            why = "it has no committed offset" if offset is None else f"its committed offset {offset} is outside [{earliest[key]}, {latest[key]}]"
            if self._reset == "error":
                raise OffsetOutOfRangeError(
                    key.bucket, -1 if offset is None else offset, earliest[key],
                    f"group {self._group.group_id}: {key} cannot start: {why} (client.scanner.group.reset=error)",
                )
            starts[key] = earliest[key] if self._reset == "earliest" else latest[key]
            log.info("group %s: %s starts at %d (%s): %s", self._group.group_id, key, starts[key], self._reset, why)
        for key, offset in starts.items():
            self._subscribe_held(key.partition_id, key.bucket, offset)
            self._owned.add(key)
            self._last_commit[key] = offset
        log.info("group %s: took %s", self._group.group_id, ", ".join(f"{key} at {offset}" for key, offset in starts.items()))

    def _bounds(self, keys: set[GroupBucket]) -> tuple[dict[GroupBucket, int], dict[GroupBucket, int]]:
        """Each bucket's earliest and latest offsets. The partitions with a log are asked together,
        one ListOffsets per leader for each end, however many partitions a rebalance hands over; a
        partition held by the lake only (or dropped since it was listed) is asked by its name."""
        ends = (OffsetSpec.earliest(), OffsetSpec.latest())
        buckets = sorted({key.bucket for key in keys})
        wanted = {key.partition_id for key in keys}
        found: dict[int, tuple[dict[int, int], dict[int, int]]] = {}
        if not self._partitioned:
            early, late = (self._admin.list_offsets(self._info.path, buckets, spec) for spec in ends)
            found[0] = early, late
        else:
            logs = [info for info in self._metadata.partitions(self._info, refresh=True).values() if info.partition_id in wanted]
            listed = [self._admin.list_partitions_offsets(logs, buckets, spec) for spec in ends]
            for partition_id in sorted(wanted):
                early_log, late_log = (answer.get(partition_id) for answer in listed)
                if early_log is None or late_log is None:
                    name = self._partition_name(partition_id)
                    early_log, late_log = (self._admin.list_offsets(self._info.path, buckets, spec, name) for spec in ends)
                found[partition_id] = early_log, late_log
        return {key: found[key.partition_id][0][key.bucket] for key in keys}, {key: found[key.partition_id][1][key.bucket] for key in keys}

    def _partition_name(self, partition_id: int) -> str | None:
        if not partition_id:
            return None
        for partition in self._admin.list_partition_infos(self._info.path):
            if partition.partition_id == partition_id:
                return partition.partition_name
        raise InvalidRequestError(f"{self._info.path} has no partition with id {partition_id}")

    def close(self) -> None:
        """Commit what the polls returned (with auto-commit), leave the group, then close."""
        try:
            if self._auto_commit and self._group.member_id:
                self._commit_quietly()
        finally:
            self._group.close()
            super().close()


def _names(keys: set[GroupBucket]) -> str:
    return ", ".join(str(key) for key in sorted(keys))
