"""The replicated side of the buckets one tablet server holds: for each bucket it leads with other
copies, the followers' progress, the ISR and the high watermark it allows; for each bucket it
copies, the fetcher that copies it; and the rules a produce with ``acks=all`` waits for.

A leader counts a follower's log end from the offset it fetches from, moves the bucket's high
watermark to the smallest log end of the ISR (:meth:`LogTablet.set_replica_limit`) and asks the
coordinator to change the ISR when a follower falls behind for ``log.replica.max-lag-time`` or
catches up (:meth:`Replication.isr_changes`, sent by the tablet server). A leader epoch names each
leadership: a follower's fetch under another epoch is refused, and an append waiting for its
followers gives up once the bucket is led under a newer epoch or by another server (it was fenced:
what it appended may be cut, so it is not acknowledged). Plain Python: the fetchers' RPCs are
behind :class:`~lakelog.server.replica.replica_fetcher.LeaderLink`.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterable, Mapping

from lakelog.config import Configuration
from lakelog.errors import NotEnoughReplicasError, NotLeaderError, OffsetOutOfRangeError, RequestTimeoutError
from lakelog.cluster_state import BucketReplicas
from lakelog.metadata import TableInfo
from lakelog.server.coordinator.table_properties import MIN_IN_SYNC_REPLICAS, server_defaulted_property
from lakelog.server.log.leader_epochs import NO_EPOCH
from lakelog.server.log.log_tablet import LogTablet
from lakelog.server.replica.in_sync_replicas import InSyncReplicas
from lakelog.server.replica.replica_fetcher import FetcherPool, FollowedBucket

log = logging.getLogger(__name__)

Key = tuple[int, int]  # (physical id, bucket)
ACKS_ALL = -1


def monotonic_ms() -> float:
    return time.monotonic() * 1000


@dataclass(frozen=True)
class ReplicationConfig:
    max_lag_ms: int = 30_000
    min_in_sync_replicas: int = 1
    fetch_wait_ms: int = 200

    @classmethod
    def from_configuration(cls, conf: Configuration) -> ReplicationConfig:
        return cls(conf.get("log.replica.max-lag-time"), conf.get("log.replica.min-in-sync-replicas"), conf.get("log.replica.fetch-wait"))


@dataclass(frozen=True)
class IsrChange:
    """An ISR a leader wants the coordinator to accept for one bucket."""

    info: TableInfo
    bucket: int
    tracker: InSyncReplicas
    wanted: tuple[int, ...]


class Replication:
    def __init__(
        self, server_id: int, config: ReplicationConfig, fetchers: FetcherPool | None, clock_ms: Callable[[], float] = monotonic_ms
    ) -> None:
        self.server_id = server_id
        # wake_polls(physical id, bucket): the fetches parked here on the bucket read it again now.
        self.wake_polls: Callable[[int, int], None] = lambda physical_id, bucket: None
        self.config = config
        self._fetchers = fetchers
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._leading: dict[Key, tuple[TableInfo, InSyncReplicas]] = {}
        self._stopping = threading.Event()
        self.isr_shrinks = 0
        self.isr_expands = 0

    # leadership

    def lead(self, info: TableInfo, bucket: int, tablet: LogTablet, copies: BucketReplicas | None) -> None:
        """This server leads ``bucket``; ``copies`` None or alone: no other replica counts."""
        key = (info.physical_id, bucket)
        self.stop_copying([key])
        tablet.following = False
        if copies is None or len(copies.replicas) == 1:
            with self._lock:
                self._leading.pop(key, None)
            tablet.on_append = None
            tablet.set_replica_limit(None)
            return
        tablet.on_append = partial(self.wake_polls, *key)
        with self._lock:
            known = self._leading.get(key)
            fresh = known is None or known[1].copies.leader_epoch != copies.leader_epoch
            if fresh:
                tracker = InSyncReplicas(self.server_id, copies, tablet.log_end_offset, self._clock_ms())
            else:
                tracker = known[1]
                if copies.isr_version >= tracker.copies.isr_version:
                    tracker.update(copies)
            self._leading[key] = (info, tracker)
        if fresh:
            if tablet.epochs.latest_epoch == NO_EPOCH and tablet.log_end_offset > tablet.log_start_offset:
                tablet.epochs.assign(0, tablet.log_start_offset)  # records from before epochs were kept
            tablet.epochs.assign(copies.leader_epoch, tablet.log_end_offset)
            log.info(
                "leading %s bucket %d in leader epoch %d from offset %d (replicas %s, ISR %s)",
                info.label, bucket, copies.leader_epoch, tablet.log_end_offset, copies.replicas, copies.isr,
            )
        tablet.set_replica_limit(tracker.high_watermark_limit())

    def stop_copying(self, keys: Iterable[Key]) -> None:
        """No fetcher changes these copies from now on: one changing a copy (appending, or cutting it
        to a leader's history it asked for before a change of leader) finishes first."""
        if self._fetchers is not None:
            for key in keys:
                self._fetchers.unfollow(key)

    def follow(self, info: TableInfo, tablets: Mapping[int, LogTablet], leaders: Mapping[int, int], replicas: Mapping[int, BucketReplicas]) -> None:
        """Copy each of ``tablets`` (by bucket) from its leader. They reach the fetchers together,
        so a fetch waiting at a leader is cut short once for all of them, not once per bucket."""
        keys = [(info.physical_id, bucket) for bucket in tablets]
        with self._lock:
            for key in keys:
                self._leading.pop(key, None)
        for key in keys:
            self.wake_polls(*key)  # polls parked here while this server led it answer "not leader" now
        if self._fetchers is None:
            raise NotLeaderError(f"tablet server {self.server_id} cannot copy {info.label} buckets {sorted(tablets)}: it runs no fetchers")
        followed = []
        for bucket, tablet in tablets.items():
            tablet.following = True
            tablet.on_append = None
            copy = FollowedBucket(info.physical_id, info.table_id, info.partition_id or 0, bucket, replicas[bucket].leader_epoch, tablet)
            followed.append((copy, leaders[bucket]))
        self._fetchers.follow(followed)

    def let_go(self, key: Key) -> None:
        """Neither lead nor copy ``key`` any more (its table or partition was dropped): polls
        parked on it answer now, not when their wait ends."""
        with self._lock:
            self._leading.pop(key, None)
        self.wake_polls(*key)
        if self._fetchers is not None:
            self._fetchers.unfollow(key)

    def epoch_start_offset(self, key: Key) -> int | None:
        """Where this leader's epoch of ``key`` began (its log end when it took over); None when no
        other copy counts."""
        with self._lock:
            found = self._leading.get(key)
        return None if found is None else found[1].epoch_start_offset

    def copies(self, key: Key) -> BucketReplicas | None:
        """The bucket's replicas and ISR as this leader keeps them; None when no other copy counts."""
        with self._lock:
            found = self._leading.get(key)
        return None if found is None else found[1].copies

    # produce

    def admit(self, info: TableInfo, bucket: int, acks: int) -> InSyncReplicas | None:
        """Before an append: with ``acks=all``, refuse it when the ISR is smaller than the table's
        min-in-sync-replicas. The bucket's followers (None: no other copy counts)."""
        key = (info.physical_id, bucket)
        with self._lock:
            found = self._leading.get(key)
        tracker = None if found is None else found[1]
        if acks != ACKS_ALL:
            return tracker
        isr = (self.server_id,) if tracker is None else tracker.isr
        needed = server_defaulted_property(info.label, info.properties, MIN_IN_SYNC_REPLICAS, self.config.min_in_sync_replicas)
        if len(isr) < needed:
            raise NotEnoughReplicasError(
                f"{info.label} bucket {bucket}: the in-sync replicas {list(isr)} are fewer than min-in-sync-replicas {needed};"
                " nothing was appended"
            )
        return tracker

    def await_replicated(self, info: TableInfo, bucket: int, tablet: LogTablet, tracker: InSyncReplicas, offset: int, timeout_s: float) -> None:
        """Wait until every ISR member holds offsets below ``offset``; RequestTimeoutError after
        ``timeout_s``, once this server stops leading the bucket under the tracker's epoch, or once
        it stops (the records may be cut by the next leader; an idempotent writer's resend is
        answered by the one that has them)."""
        key = (info.physical_id, bucket)

        def leading() -> bool:
            with self._lock:
                found = self._leading.get(key)
            return found is not None and found[1] is tracker

        if tablet.wait_for_high_watermark(offset, timeout_s, lambda: leading() and not self._stopping.is_set()):
            return
        if self._stopping.is_set():
            raise RequestTimeoutError(
                f"tablet server {self.server_id} is stopping: offsets of {info.label} bucket {bucket} up to {offset} are not acknowledged here"
            )
        if not leading():  # appended, so not a routing refusal: only an idempotent writer may resend it
            raise RequestTimeoutError(
                f"tablet server {self.server_id} no longer leads {info.label} bucket {bucket} in leader epoch"
                f" {tracker.copies.leader_epoch}: offsets up to {offset} are not acknowledged here"
            )
        raise RequestTimeoutError(
            f"{info.label} bucket {bucket}: the in-sync replicas {list(tracker.isr)} did not all hold offsets up to {offset}"
            f" within {timeout_s:.1f} s"
        )

    # followers' fetches

    def follower_fetched(self, info: TableInfo, bucket: int, follower: int, leader_epoch: int, fetch_offset: int, tablet: LogTablet) -> None:
        """A follower fetches from ``fetch_offset`` under ``leader_epoch``: refused unless this server
        leads the bucket in that epoch; else its progress counts toward ISR and high watermark."""
        key = (info.physical_id, bucket)
        with self._lock:
            found = self._leading.get(key)
            tracker = None if found is None else found[1]
            if tracker is None or tracker.copies.leader_epoch != leader_epoch:
                mine = "no leader epoch" if tracker is None else f"leader epoch {tracker.copies.leader_epoch}"
                raise NotLeaderError(
                    f"tablet server {self.server_id} leads {info.label} bucket {bucket} with {mine}; follower {follower} fetches in epoch {leader_epoch}"
                )
            if not tablet.log_start_offset <= fetch_offset <= tablet.log_end_offset:
                raise OffsetOutOfRangeError(bucket, fetch_offset, tablet.log_start_offset)
            tracker.fetched(follower, fetch_offset, tablet.log_end_offset, self._clock_ms())
            limit = tracker.high_watermark_limit()
        tablet.set_replica_limit(limit)

    def end_offset_for_epoch(self, info: TableInfo, bucket: int, tablet: LogTablet, epoch: int) -> tuple[int, int]:
        """Where ``epoch`` ends in this leader's log (see :mod:`leader_epochs`)."""
        if self.copies((info.physical_id, bucket)) is None:
            raise NotLeaderError(f"tablet server {self.server_id} does not lead {info.label} bucket {bucket} with other replicas")
        return tablet.epochs.end_offset_for(epoch, tablet.log_end_offset)

    # ISR changes

    def isr_changes(self, high_watermark: Callable[[Key], int | None]) -> list[IsrChange]:
        """The ISR changes this leader should ask for now: followers behind for longer than the lag
        time leave, followers caught up join."""
        now = self._clock_ms()
        with self._lock:
            leading = list(self._leading.items())
        changes = []
        for key, (info, tracker) in leading:
            hw = high_watermark(key)
            if hw is None:
                continue
            with self._lock:
                wanted = tracker.wanted_isr(now, self.config.max_lag_ms, hw)
            if wanted is not None:
                changes.append(IsrChange(info, key[1], tracker, wanted))
        return changes

    def apply_isr(self, change: IsrChange, copies: BucketReplicas, tablet: LogTablet) -> None:
        """The coordinator accepted ``copies`` for the bucket of ``change``."""
        key = (change.info.physical_id, change.bucket)
        with self._lock:
            found = self._leading.get(key)
            if found is None or found[1] is not change.tracker or copies.leader_epoch != change.tracker.copies.leader_epoch:
                return
            before = change.tracker.isr
            change.tracker.update(copies)
            self.isr_shrinks += len(set(before) - set(copies.isr)) > 0
            self.isr_expands += len(set(copies.isr) - set(before)) > 0
            limit = change.tracker.high_watermark_limit()
        tablet.set_replica_limit(limit)
        log.info("%s bucket %d: ISR %s -> %s (version %d)", change.info.label, change.bucket, list(before), list(copies.isr), copies.isr_version)

    def under_replicated(self) -> int:
        """Buckets led here whose ISR lacks some replica."""
        with self._lock:
            return sum(len(t.isr) < len(t.copies.replicas) for _, t in self._leading.values())

    def stop_waiting(self) -> None:
        """Answer the produces waiting for their replication now: a stopping server's RPC threads
        must end within its stop, not when their produce timeout runs out."""
        self._stopping.set()

    def close(self) -> None:
        if self._fetchers is not None:
            self._fetchers.close()
