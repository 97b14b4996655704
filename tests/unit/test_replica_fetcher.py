"""A follower's fetcher (server/replica/replica_fetcher.py) against a fake leader link that holds a
fetch with nothing new as a leader does, until the fetcher cuts it short: a bucket followed while
such a fetch waits is copied without waiting for it, close() does not wait for it either, and a
bucket the leader refuses sits out a while alone (on a clock the test moves)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

import pyarrow as pa
import pytest

from lakelog.cluster_state import ServerNode
from lakelog.errors import NotLeaderError, OffsetOutOfRangeError
from lakelog.record.batch import encode_batch
from lakelog.server.log.log_tablet import LogConfig, LogTablet
from lakelog.server.log.writer_snapshot import encode_writer_snapshot
from lakelog.server.log.writer_state import AppendedBatch, WriterEntry
from lakelog.server.replica.replica_fetcher import REFUSED_BACKOFF_S, FollowedBucket, FollowerFetch, LeaderAnswer, ReplicaFetcher

LEADER = ServerNode(1, "127.0.0.1", 1)
HOLD_S = 60.0  # how long the fake leader holds a fetch with nothing new: far past any test's deadline
DEADLINE_S = 10.0


class HoldingLeader:
    """Answers a fetch at once when one of its buckets has records at the fetch offset or is
    refused, else holds it until the fetcher's ``wake`` is set (then the fetch was cut short) or
    HOLD_S ends."""

    def __init__(self) -> None:
        self.records: dict[tuple[int, int], dict[int, bytes]] = {}  # by bucket, by fetch offset
        self.refused: set[tuple[int, int]] = set()
        self.started_over: dict[tuple[int, int], LeaderAnswer] = {}  # answered once, below the local log start
        self.fetched: list[list[tuple[int, int]]] = []
        self.cut_short = 0
        self.holding = threading.Event()
        self.done_by: list[str] = []  # the threads that said they fetch no more

    def fetch(
        self, leader: ServerNode, follower_id: int, fetches: Sequence[FollowerFetch], max_wait_ms: int, wake: threading.Event
    ) -> list[LeaderAnswer] | None:
        self.fetched.append([f.bucket.key for f in fetches])
        answers = [self._answer(f) for f in fetches]
        if any(answer.records or answer.error for answer in answers):
            wake.set()
            return answers
        self.holding.set()
        woken = wake.wait(HOLD_S)
        self.holding.clear()
        if woken:
            self.cut_short += 1
            return None
        return answers

    def _answer(self, fetch: FollowerFetch) -> LeaderAnswer:
        key = fetch.bucket.key
        if key in self.started_over:
            return self.started_over.pop(key)
        if key in self.refused:
            return LeaderAnswer(key, b"", 0, 0, error=NotLeaderError(f"tablet server 1 does not know yet it leads {key}"))
        return LeaderAnswer(key, self.records.get(key, {}).get(fetch.fetch_offset, b""), high_watermark=0, log_start_offset=0)

    def end_offset_for_epoch(self, leader: ServerNode, bucket: FollowedBucket, epoch: int) -> tuple[int, int]:
        raise AssertionError("a copy without leader epochs is cut to its high watermark without asking")

    def done(self) -> None:
        self.done_by.append(threading.current_thread().name)


@pytest.fixture
def tablets(tmp_path: Path) -> Iterator[dict[int, LogTablet]]:
    opened = {bucket: LogTablet.open(tmp_path / f"b{bucket}", LogConfig(), bucket, f"t bucket {bucket}") for bucket in (0, 1, 2)}
    yield opened
    for tablet in opened.values():
        tablet.close()


def _followed(tablet: LogTablet, bucket: int) -> FollowedBucket:
    return FollowedBucket(physical_id=7, table_id=7, partition_id=0, bucket=bucket, leader_epoch=0, tablet=tablet)


def _leader_batches(tmp_path: Path, *rows: int) -> dict[int, bytes]:
    """Batches as a leader stores them (offsets assigned) and hands them to its followers, by the
    offset a follower fetches each from."""
    leader = LogTablet.open(tmp_path / "leader", LogConfig(), 0, "leader")
    try:
        offsets = [leader.log_end_offset]
        for count in rows:
            leader.append(encode_batch(pa.record_batch({"id": pa.array(range(count), pa.int64())}), schema_id=1))
            offsets.append(leader.log_end_offset)
        # max_bytes 1: a read gives at least one whole batch, and here no more
        return {start: bytes(leader.read_for_follower(start, 1)[0].records) for start in offsets[:-1]}
    finally:
        leader.close()


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _fetcher(
    link: HoldingLeader, clock: Clock | None = None, start_over: Callable[[FollowedBucket, int, bytes], None] = lambda *_: None
) -> ReplicaFetcher:
    return ReplicaFetcher(2, LEADER, link, 200, start_over, lambda server_id: LEADER, clock or Clock())


def test_a_copy_below_the_leaders_local_log_starts_over_there_with_the_leaders_writers(tablets: dict[int, LogTablet]) -> None:
    link = HoldingLeader()
    writers = encode_writer_snapshot(40, [WriterEntry(42, 0, (AppendedBatch(0, 0, 20, 1, 0xABC),))])
    link.started_over[(7, 0)] = LeaderAnswer(
        (7, 0), b"", 60, 40, error=OffsetOutOfRangeError(0, 0, 40), writer_state=writers
    )
    started: list[tuple[int, int, bytes]] = []

    def start_over(bucket: FollowedBucket, offset: int, state: bytes) -> None:
        bucket.tablet.restart_at(offset, state)
        started.append((bucket.bucket, offset, state))

    fetcher = _fetcher(link, start_over=start_over)
    try:
        fetcher.follow([_followed(tablets[0], 0)])
        _until(lambda: started != [], "the copy never started over")
        assert started == [(0, 40, writers)]
        assert (tablets[0].log_start_offset, tablets[0].log_end_offset) == (40, 40)
        assert tablets[0].writers_at_log_start() == (40, writers)
    finally:
        fetcher.close()


def test_buckets_followed_while_a_fetch_waits_are_copied_without_waiting_for_it(tmp_path: Path, tablets: dict[int, LogTablet]) -> None:
    link = HoldingLeader()
    link.records[(7, 1)] = _leader_batches(tmp_path, 5)
    fetcher = _fetcher(link)
    try:
        fetcher.follow([_followed(tablets[0], 0)])
        _until(link.holding.is_set, "the fetch of the quiet bucket never reached the leader")
        fetcher.follow([_followed(tablets[1], 1), _followed(tablets[2], 2)])  # a new table's buckets, as one LeaderAndIsr gives them
        _until(lambda: tablets[1].log_end_offset == 5, "the buckets followed later waited behind the held fetch")
        assert link.cut_short == 1, "the held fetch was not cut short, or was once per bucket"
        assert [(7, 0), (7, 1), (7, 2)] in [sorted(keys) for keys in link.fetched], "the next fetch did not carry every bucket"
        assert tablets[0].log_end_offset == 0
    finally:
        fetcher.close()


def test_closing_a_fetcher_cuts_a_waiting_fetch_short(tablets: dict[int, LogTablet]) -> None:
    link = HoldingLeader()
    fetcher = _fetcher(link)
    fetcher.follow([_followed(tablets[0], 0)])
    _until(link.holding.is_set, "the fetch never reached the leader")
    fetcher.close()
    assert link.cut_short == 1, "close() waited for the leader to end the fetch"
    assert link.done_by == ["replica-fetcher-1"], "the fetcher's thread did not let its link go (a stream connection would stay open)"


def test_following_a_bucket_again_under_the_same_epoch_leaves_the_fetch_alone(tablets: dict[int, LogTablet]) -> None:
    link = HoldingLeader()
    fetcher = _fetcher(link)
    try:
        bucket = _followed(tablets[0], 0)
        fetcher.follow([bucket])
        _until(link.holding.is_set, "the fetch never reached the leader")
        fetcher.follow([_followed(tablets[0], 0)])  # what each LeaderAndIsr of the table repeats
        time.sleep(0.05)
        assert link.cut_short == 0 and link.holding.is_set() and len(link.fetched) == 1
    finally:
        fetcher.close()


def test_a_refused_bucket_sits_out_a_while_alone_and_the_others_go_on(tmp_path: Path, tablets: dict[int, LogTablet]) -> None:
    link = HoldingLeader()
    link.refused.add((7, 0))
    link.records[(7, 1)] = _leader_batches(tmp_path, 2, 3, 4)
    clock = Clock()
    fetcher = _fetcher(link, clock)
    try:
        fetcher.follow([_followed(tablets[0], 0), _followed(tablets[1], 1)])
        _until(lambda: tablets[1].log_end_offset == 9 and link.holding.is_set(), "the bucket beside a refused one was not copied")
        assert [sorted(keys) for keys in link.fetched] == [[(7, 0), (7, 1)], [(7, 1)], [(7, 1)], [(7, 1)]], (
            "the refused bucket was asked for again before its backoff ended, or held the other back"
        )
        link.refused.clear()
        clock.now += REFUSED_BACKOFF_S
        fetcher.follow([_followed(tablets[2], 2)])  # cuts the held fetch short: the next one is planned on the moved clock
        _until(lambda: [(7, 0), (7, 1), (7, 2)] in [sorted(keys) for keys in link.fetched], "the refused bucket was never asked for again")
    finally:
        fetcher.close()


class SlowEpochLeader(HoldingLeader):
    """Answers where a leader epoch ends only when the test lets it: the answer of a leader asked
    before this server's role changed."""

    def __init__(self, epoch_end: tuple[int, int]) -> None:
        super().__init__()
        self.epoch_end = epoch_end
        self.asked = threading.Event()
        self.release = threading.Event()

    def end_offset_for_epoch(self, leader: ServerNode, bucket: FollowedBucket, epoch: int) -> tuple[int, int]:
        self.asked.set()
        assert self.release.wait(DEADLINE_S), "the test never released the answer"
        return self.epoch_end


def test_a_copy_let_go_while_its_leader_answers_where_an_epoch_ends_is_not_cut(tablets: dict[int, LogTablet]) -> None:
    """This server was told to follow, asked the leader where its epoch ends, and was made leader
    before the answer came (the old leader paused): the late answer must not cut the log it now leads
    and has acknowledged from (the replicated walk lost records that way)."""
    tablet = tablets[0]
    tablet.epochs.assign(1, 0)
    tablet.append(encode_batch(pa.record_batch({"id": pa.array(range(10), pa.int64())}), schema_id=1))
    link = SlowEpochLeader(epoch_end=(1, 4))
    fetcher = _fetcher(link)
    try:
        fetcher.follow([_followed(tablet, 0)])
        _until(link.asked.is_set, "the fetcher never asked where the copy's epoch ends")
        fetcher.unfollow((7, 0))  # this server leads the bucket now
        link.release.set()
    finally:
        fetcher.close()  # joins the fetcher's thread: whatever the answer made it do is done
    assert tablet.log_end_offset == 10
