"""A follower's copying of the buckets one leader leads: one thread per leader server, one fetch
at a time for all of that leader's buckets, each from this copy's log end.

Before its first fetch under a leader epoch, a bucket is cut back to where its history and the
leader's agree (:mod:`lakelog.server.log.leader_epochs`). The leader answers from its log end (not
its high watermark): the batches as it stored them, up to the end of the leader epoch they were
appended in, which this copy appends as they are (:meth:`LogTablet.append_as_follower`) and fsyncs on a thread of
its own while it fetches again (the next fetch tells the leader what it holds: an fsync on that
path would delay every ``acks=all`` acknowledgement by it), and its
high watermark, which this copy follows, and its local log start: this copy deletes the segments
below it as the leader did once they were uploaded. A fetch from this copy's log end is also how
the leader learns what this copy holds. The RPCs are behind :class:`LeaderLink` (gRPC in production).

A fetch with nothing new waits at the leader for up to ``log.replica.fetch-wait``. A bucket followed
meanwhile (a new table or partition, a leader that moved here) cuts that fetch short, and the next
one carries it: a produce with ``acks=all`` to it waits for this copy, and would otherwise wait out
a fetch of other buckets first. A bucket the leader refuses (it does not know yet that it leads
that epoch, the table was dropped there first) sits out the fetches of the next
:data:`REFUSED_BACKOFF_S` alone, as a Kafka fetcher delays a partition in error: the other buckets
of that leader go on being copied at full speed.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from lakelog.errors import LakelogError, OffsetOutOfRangeError
from lakelog.cluster_state import ServerNode
from lakelog.server.log.leader_epochs import NO_EPOCH
from lakelog.server.log.log_tablet import LogTablet

log = logging.getLogger(__name__)

BACKOFF_S = 0.2  # after a failed fetch: the leader may be gone, and the coordinator will say who leads
REFUSED_BACKOFF_S = 0.05  # a bucket the leader refused is asked for again after this


@dataclass(frozen=True)
class FollowedBucket:
    """A bucket this server copies: its log here, where it lives on the wire, the leader epoch followed."""

    physical_id: int
    table_id: int
    partition_id: int
    bucket: int
    leader_epoch: int
    tablet: LogTablet

    @property
    def key(self) -> tuple[int, int]:
        return self.physical_id, self.bucket


@dataclass(frozen=True)
class FollowerFetch:
    bucket: FollowedBucket
    fetch_offset: int


@dataclass(frozen=True)
class LeaderAnswer:
    """A leader's answer for one bucket: its batches from the fetch offset, or an error."""

    key: tuple[int, int]
    records: bytes | memoryview  # a view of the received answer, valid until the next fetch from that leader
    high_watermark: int
    log_start_offset: int
    leader_epoch: int = NO_EPOCH  # the epoch the records were appended in
    starts_segment: bool = False  # the records begin a segment of the leader's log
    error: LakelogError | None = None
    writer_state: bytes = b""  # with an answer to start over: the writers as of log_start_offset


class LeaderLink(Protocol):
    def fetch(
        self, leader: ServerNode, follower_id: int, fetches: Sequence[FollowerFetch], max_wait_ms: int, wake: threading.Event
    ) -> list[LeaderAnswer] | None:
        """The leader's answers; None when ``wake`` was set before they came (the fetch is then
        cancelled). The link sets ``wake`` itself when the answers arrive, so the fetcher waits on
        that one event for both."""
        ...

    def end_offset_for_epoch(self, leader: ServerNode, bucket: FollowedBucket, epoch: int) -> tuple[int, int]:
        """The largest epoch at or below ``epoch`` in the leader's log and where it ends there."""
        ...

    def done(self) -> None:
        """The calling fetcher thread fetches no more: what the link keeps for it can go."""
        ...


class ReplicaFetcher:
    """Copies the buckets of one leader server until :meth:`close`."""

    def __init__(
        self,
        server_id: int,
        leader: ServerNode,
        link: LeaderLink,
        max_wait_ms: int,
        start_over: Callable[[FollowedBucket, int, bytes], None],
        resolve: Callable[[int], ServerNode | None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``start_over(bucket, offset, writer_state)``: empty this copy and restart it at
        ``offset``, the leader's earliest local offset (this copy is behind what the leader still
        keeps locally), with the leader's writers as of there;
        ``resolve(server_id)``: the leader's address as the coordinator knows it now (a restarted
        leader may listen elsewhere); ``clock``: seconds, for the refused buckets' backoff."""
        self.server_id = server_id
        self.leader = leader
        self._resolve = resolve
        self._link = link
        self._max_wait_ms = max_wait_ms
        self._start_over = start_over
        self._lock = threading.Lock()
        self._buckets: dict[tuple[int, int], FollowedBucket] = {}
        self._unchecked: set[tuple[int, int]] = set()  # not yet cut back to the leader's history
        # by the clock: not fetched before then (a passed time is kept until the bucket is followed anew or let go)
        self._refused_until: dict[tuple[int, int], float] = {}
        self._clock = clock
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by a bucket newly followed, by close() and by an answer's arrival
        self._failing = False
        self._flusher = ThreadPoolExecutor(1, thread_name_prefix=f"replica-flush-{leader.server_id}")
        self._thread = threading.Thread(target=self._run, name=f"replica-fetcher-{leader.server_id}", daemon=True)
        self._thread.start()

    def follow(self, buckets: Sequence[FollowedBucket]) -> None:
        """Copy ``buckets`` too; one already copied under the same leader epoch stays as it is."""
        with self._lock:
            new = False
            for bucket in buckets:
                known = self._buckets.get(bucket.key)
                if known is not None and known.leader_epoch == bucket.leader_epoch and known.tablet is bucket.tablet:
                    continue
                self._buckets[bucket.key] = bucket
                self._unchecked.add(bucket.key)
                self._refused_until.pop(bucket.key, None)  # under a new epoch the leader may take it at once
                new = True
            if new:
                self._wake.set()  # under the lock: a fetch's bucket set is taken, and the event cleared, under it too

    def unfollow(self, key: tuple[int, int]) -> None:
        with self._lock:
            self._buckets.pop(key, None)
            self._unchecked.discard(key)
            self._refused_until.pop(key, None)

    @property
    def keys(self) -> set[tuple[int, int]]:
        with self._lock:
            return set(self._buckets)

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(10)
        self._flusher.shutdown(wait=True)

    def _run(self) -> None:
        try:
            self._fetch_until_closed()
        finally:
            self._link.done()

    def _fetch_until_closed(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                buckets = dict(self._buckets)
                self._wake.clear()
            if not buckets:
                self._wake.wait(0.5)
                continue
            try:
                self.fetch_once(buckets)
            except LakelogError as error:
                if not self._failing:
                    log.warning("fetching from leader %d at %s failed, retrying: %s", self.leader.server_id, self.leader.address, error)
                self._failing = True
                self._stop.wait(BACKOFF_S)
                moved = self._resolve(self.leader.server_id)
                if moved is not None and moved.address != self.leader.address:
                    log.info("leader %d moved from %s to %s", moved.server_id, self.leader.address, moved.address)
                    self.leader = moved
            except Exception:  # noqa: BLE001 - a copy that cannot be written is retried, the thread goes on
                log.exception("copying from leader %d failed", self.leader.server_id)
                self._stop.wait(BACKOFF_S)

    def _cut_back(self, bucket: FollowedBucket) -> None:
        """Cut ``bucket``'s copy to where its latest epoch ends in the leader's log (Kafka's rule:
        the smaller of the leader's end and this copy's end of the epoch both know); a copy without
        epochs, or older than every epoch the leader knows, is cut to its high watermark."""
        tablet = bucket.tablet
        mine = tablet.epochs.latest_epoch
        epoch, leader_end = (NO_EPOCH, -1) if mine == NO_EPOCH else self._link.end_offset_for_epoch(self.leader, bucket, mine)
        with self._lock:
            if self._buckets.get(bucket.key) is not bucket:
                return  # led here, or followed anew, while the leader answered: not this copy to cut any more
            if epoch == NO_EPOCH:
                target = tablet.high_watermark
            else:
                target = min(leader_end, tablet.epochs.end_offset_for(epoch, tablet.log_end_offset)[1])
            if target < tablet.log_end_offset:
                tablet.truncate_to(target)
            self._unchecked.discard(bucket.key)

    def fetch_once(self, buckets: dict[tuple[int, int], FollowedBucket]) -> None:
        """One fetch of every bucket from its log end (but those refused a moment ago), and the
        answers appended; a bucket newly followed is cut back to the leader's history first."""
        with self._lock:
            unchecked = [buckets[key] for key in self._unchecked if key in buckets]
        for bucket in unchecked:
            self._cut_back(bucket)
        now = self._clock()
        with self._lock:
            backed_off = [until for key, until in self._refused_until.items() if until > now and key in buckets]
            buckets = {key: b for key, b in buckets.items() if key not in self._unchecked and self._refused_until.get(key, now) <= now}
        if not buckets:
            if backed_off:
                self._wake.wait(min(backed_off) - now)
            return
        fetches = [FollowerFetch(b, b.tablet.log_end_offset) for b in buckets.values()]
        answers = self._link.fetch(self.leader, self.server_id, fetches, self._max_wait_ms, self._wake)
        if answers is None:
            return  # a bucket newly followed (or close()) cut the fetch short: the next one carries it
        if self._failing:
            log.info("fetching from leader %d at %s works again", self.leader.server_id, self.leader.address)
            self._failing = False
        refused: list[tuple[int, int]] = []
        for answer in answers:
            bucket = buckets.get(answer.key)
            if bucket is not None:
                self._take(bucket, answer, refused)
        if refused:
            until = self._clock() + REFUSED_BACKOFF_S
            with self._lock:
                self._refused_until.update((key, until) for key in refused if self._buckets.get(key) is buckets[key])

    def _take(self, bucket: FollowedBucket, answer: LeaderAnswer, refused: list[tuple[int, int]]) -> None:
        """Apply the leader's answer to ``bucket``'s copy. Under the lock, and only while the bucket
        is still followed as ``bucket``: :meth:`unfollow` (this server leads it now, or follows it
        under another epoch) waits for a change in progress, and nothing changes the copy after it."""
        with self._lock:
            if self._buckets.get(answer.key) is not bucket:
                return
            if isinstance(answer.error, OffsetOutOfRangeError) and answer.log_start_offset > bucket.tablet.log_end_offset:
                self._start_over(bucket, answer.log_start_offset, answer.writer_state)
            elif answer.error is not None:
                refused.append(answer.key)
                log.debug("leader %d refused %s: %s", self.leader.server_id, bucket.tablet.name, answer.error)
            else:
                if answer.records:
                    bucket.tablet.append_as_follower(answer.records, answer.leader_epoch, answer.starts_segment)
                    self._flusher.submit(_settle, bucket.tablet)
                bucket.tablet.follow_high_watermark(answer.high_watermark)
                # The leader keeps locally only what remote storage does not hold yet, nor does this copy.
                bucket.tablet.delete_segments_before(answer.log_start_offset)


def _settle(tablet: LogTablet) -> None:
    """Make what a copy appended durable (a copy closed meanwhile was flushed by its close)."""
    try:
        tablet.settle()
    except LakelogError as error:
        log.warning("%s: the copy is not durable: %s", tablet.name, error)


class FetcherPool:
    """This server's fetchers, one per leader server it copies from."""

    def __init__(
        self,
        server_id: int,
        link: LeaderLink,
        nodes: Callable[[int], ServerNode | None],
        max_wait_ms: int,
        start_over: Callable[[FollowedBucket, int, bytes], None],
    ) -> None:
        self._server_id = server_id
        self._link = link
        self._nodes = nodes
        self._max_wait_ms = max_wait_ms
        self._start_over = start_over
        self._lock = threading.Lock()
        self._fetchers: dict[int, ReplicaFetcher] = {}

    def follow(self, buckets: Sequence[tuple[FollowedBucket, int]]) -> None:
        """Copy each bucket from the leader paired with it (and from no other leader)."""
        by_leader: dict[int, list[FollowedBucket]] = {}
        for bucket, leader_id in buckets:
            by_leader.setdefault(leader_id, []).append(bucket)
        for leader_id, group in by_leader.items():
            node = self._nodes(leader_id)
            with self._lock:
                others = [fetcher for server_id, fetcher in self._fetchers.items() if server_id != leader_id]
                for fetcher, bucket in itertools.product(others, group):
                    fetcher.unfollow(bucket.key)
                fetcher = self._fetchers.get(leader_id)
                if node is None:
                    log.warning("cannot copy %s: their leader, tablet server %d, is not known", [b.tablet.name for b in group], leader_id)
                    continue
                if fetcher is None or fetcher.leader.address != node.address:
                    if fetcher is not None:
                        fetcher.close()
                    fetcher = ReplicaFetcher(self._server_id, node, self._link, self._max_wait_ms, self._start_over, self._nodes)
                    self._fetchers[leader_id] = fetcher
            fetcher.follow(group)

    def unfollow(self, key: tuple[int, int]) -> None:
        with self._lock:
            fetchers = list(self._fetchers.values())
        for fetcher in fetchers:
            fetcher.unfollow(key)

    def followed(self) -> set[tuple[int, int]]:
        with self._lock:
            fetchers = list(self._fetchers.values())
        return {key for fetcher in fetchers for key in fetcher.keys}

    def close(self) -> None:
        with self._lock:
            fetchers, self._fetchers = list(self._fetchers.values()), {}
        for fetcher in fetchers:
            fetcher.close()
