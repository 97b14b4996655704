"""A follower's fetcher (server/replica/replica_fetcher.py) against a fake leader link that holds a
fetch with nothing new as a leader does, until the fetcher cuts it short: a bucket followed while
such a fetch waits is copied without waiting for it, and close() does not wait for it either."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Iterator, Sequence

import pyarrow as pa
import pytest

from lakelog.cluster_state import ServerNode
from lakelog.record.batch import encode_batch
from lakelog.server.log.log_tablet import LogConfig, LogTablet
from lakelog.server.replica.replica_fetcher import FollowedBucket, FollowerFetch, LeaderAnswer, ReplicaFetcher

LEADER = ServerNode(1, "127.0.0.1", 1)
HOLD_S = 60.0  # how long the fake leader holds a fetch with nothing new: far past any test's deadline
DEADLINE_S = 10.0


class HoldingLeader:
    """Answers a fetch at once when one of its buckets has records past the fetch offset, else
    holds it until the fetcher's ``wake`` is set (then the fetch was cut short) or HOLD_S ends."""

    def __init__(self) -> None:
        self.records: dict[tuple[int, int], bytes] = {}
        self.fetched: list[list[tuple[int, int]]] = []
        self.cut_short = 0
        self.holding = threading.Event()

    def fetch(
        self, leader: ServerNode, follower_id: int, fetches: Sequence[FollowerFetch], max_wait_ms: int, wake: threading.Event
    ) -> list[LeaderAnswer] | None:
        self.fetched.append([f.bucket.key for f in fetches])
        answers = [self._answer(f) for f in fetches]
        if any(answer.records for answer in answers):
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
        records = self.records.get(fetch.bucket.key, b"") if fetch.fetch_offset == 0 else b""
        return LeaderAnswer(fetch.bucket.key, records, high_watermark=0, log_start_offset=0)

    def end_offset_for_epoch(self, leader: ServerNode, bucket: FollowedBucket, epoch: int) -> tuple[int, int]:
        raise AssertionError("a copy without leader epochs is cut to its high watermark without asking")


@pytest.fixture
def tablets(tmp_path: Path) -> Iterator[dict[int, LogTablet]]:
    opened = {bucket: LogTablet.open(tmp_path / f"b{bucket}", LogConfig(), bucket, f"t bucket {bucket}") for bucket in (0, 1, 2)}
    yield opened
    for tablet in opened.values():
        tablet.close()


def _followed(tablet: LogTablet, bucket: int) -> FollowedBucket:
    return FollowedBucket(physical_id=7, table_id=7, partition_id=0, bucket=bucket, leader_epoch=0, tablet=tablet)


def _leader_batch(tmp_path: Path, rows: int) -> bytes:
    """A batch as a leader stores it (offsets assigned) and hands it to its followers."""
    leader = LogTablet.open(tmp_path / "leader", LogConfig(), 0, "leader")
    try:
        leader.append(encode_batch(pa.record_batch({"id": pa.array(range(rows), pa.int64())}), schema_id=1))
        read, _ = leader.read_for_follower(0, 1 << 20)
        return bytes(read.records)
    finally:
        leader.close()


def _until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def _fetcher(link: HoldingLeader) -> ReplicaFetcher:
    return ReplicaFetcher(2, LEADER, link, 200, start_over=lambda bucket, offset: None, resolve=lambda server_id: LEADER)


def test_buckets_followed_while_a_fetch_waits_are_copied_without_waiting_for_it(tmp_path: Path, tablets: dict[int, LogTablet]) -> None:
    link = HoldingLeader()
    link.records[(7, 1)] = _leader_batch(tmp_path, 5)
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
