"""A bucket's log as a replica, on real files: the high watermark held back by the other in-sync
replicas, a follower's copy of the leader's batches (fsynced apart from its appends), cutting back
by leader epoch."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from lakelog.errors import InvalidRequestError
from lakelog.record.batch import iter_headers
from lakelog.server.log.leader_epochs import NO_EPOCH, LeaderEpochs
from lakelog.server.log.log_tablet import LogTablet

OpenTablet = Callable[..., LogTablet]
MakeBatch = Callable[..., bytes]


def leader_batches(tablet: LogTablet, offset: int = 0) -> tuple[bytes, int, bool]:
    read, epoch = tablet.read_for_follower(offset, 1 << 20)
    return bytes(read.records), epoch, read.starts_segment


def test_the_high_watermark_waits_for_the_other_in_sync_replicas(open_tablet: OpenTablet, make_batch: MakeBatch) -> None:
    leader = open_tablet()
    leader.set_replica_limit(0)
    leader.append(make_batch(5))
    assert (leader.log_end_offset, leader.high_watermark) == (5, 0)
    assert leader.read(0, 100).records == b"" and leader.read(5, 100).records == b"", "past the HW: nothing, not out of range"
    assert not leader.wait_for_high_watermark(5, 0.01, lambda: True)
    leader.append(make_batch(5))
    leader.set_replica_limit(7)
    assert leader.high_watermark == 5, "a batch boundary at or below what the followers hold"
    leader.set_replica_limit(10)
    assert leader.high_watermark == 10 and leader.wait_for_high_watermark(10, 0.01, lambda: True)
    leader.set_replica_limit(None)
    leader.append(make_batch(1))
    assert leader.high_watermark == 11, "no other replica counts: the log alone decides"


def test_a_follower_copies_batches_as_the_leader_stored_them_and_rolls_where_it_did(
    open_tablet: OpenTablet, make_batch: MakeBatch, clock
) -> None:
    leader = open_tablet("leader", segment_max_bytes=1)
    leader.epochs.assign(3, 0)
    for rows in (2, 3, 4):
        leader.append(make_batch(rows))
        clock.now += 1000
    follower = open_tablet("follower")
    offset = 0
    while offset < leader.log_end_offset:
        records, epoch, starts = leader_batches(leader, offset)
        offset = follower.append_as_follower(records, epoch, starts)
    follower.follow_high_watermark(leader.high_watermark)
    stored = [(h.base_offset, h.commit_timestamp) for s in leader.segments for _, h in s.iter_batches()]
    assert [(h.base_offset, h.commit_timestamp) for s in follower.segments for _, h in s.iter_batches()] == stored
    assert [s.base_offset for s in follower.segments] == [s.base_offset for s in leader.segments]
    assert follower.log_end_offset == 9 and follower.high_watermark < 9, "appended, not yet fsynced: the copy shows none of it"
    follower.settle()  # the fetcher's flusher, off the fetch path
    assert follower.high_watermark == 9 and follower.epochs.entries == [(3, 0)]
    with pytest.raises(InvalidRequestError, match="expected 9"):
        follower.append_as_follower(leader_batches(leader, 0)[0], 3, True)


def test_a_leaders_answer_to_a_follower_stops_at_the_end_of_an_epoch(open_tablet: OpenTablet, make_batch: MakeBatch) -> None:
    leader = open_tablet()
    leader.epochs.assign(1, 0)
    leader.append(make_batch(2))
    leader.epochs.assign(2, 2)
    leader.append(make_batch(3))
    records, epoch, _ = leader_batches(leader, 0)
    assert epoch == 1 and [h.base_offset for _, h in iter_headers(records)] == [0]
    records, epoch, _ = leader_batches(leader, 2)
    assert epoch == 2 and [h.base_offset for _, h in iter_headers(records)] == [2]


def test_truncating_cuts_the_tail_its_epochs_and_the_high_watermark(open_tablet: OpenTablet, make_batch: MakeBatch, tmp_path: Path) -> None:
    copy = open_tablet(segment_max_bytes=1)
    copy.epochs.assign(1, 0)
    for _ in range(3):
        copy.append(make_batch(2))
    copy.epochs.assign(2, 6)
    copy.append(make_batch(2))
    assert copy.truncate_to(5) == 4, "cut at the batch boundary at or below"
    assert (copy.log_end_offset, copy.high_watermark) == (4, 4)
    assert copy.epochs.entries == [(1, 0)]
    copy.append(make_batch(1))
    assert copy.log_end_offset == 5
    reopened = LogTablet.open(tmp_path / "bucket", copy.config, 0, "again")
    try:
        assert reopened.log_end_offset == 5 and reopened.fence is None, "the cut is not taken for lost acknowledged records"
    finally:
        copy.close()
        reopened.close()


def test_restarting_a_copy_at_the_leaders_local_start(open_tablet: OpenTablet, make_batch: MakeBatch) -> None:
    copy = open_tablet()
    copy.epochs.assign(1, 0)
    copy.append(make_batch(3))
    copy.restart_at(100)
    assert (copy.log_start_offset, copy.log_end_offset, copy.high_watermark) == (100, 100, 100)
    assert copy.epochs.latest_epoch == NO_EPOCH


def test_leader_epochs_answer_where_an_epoch_ends_and_survive_a_restart(tmp_path: Path) -> None:
    epochs = LeaderEpochs(tmp_path)
    epochs.assign(1, 0)
    epochs.assign(3, 40)
    epochs.assign(2, 50)  # older than the latest: ignored
    epochs.assign(4, 40)  # epoch 3 appended nothing: replaced
    epochs.assign(6, 90)
    assert LeaderEpochs(tmp_path).entries == [(1, 0), (4, 40), (6, 90)]
    assert epochs.end_offset_for(1, 120) == (1, 40)
    assert epochs.end_offset_for(5, 120) == (4, 90), "an epoch this log never had: the one before it"
    assert epochs.end_offset_for(7, 120) == (6, 120)
    assert epochs.end_offset_for(0, 120) == (NO_EPOCH, -1)
    assert epochs.epoch_at(45) == (4, 90) and epochs.epoch_at(95) == (6, None)
    epochs.truncate_from_end(90)
    assert LeaderEpochs(tmp_path).entries == [(1, 0), (4, 40)]


def test_a_followers_copy_never_rolls_on_its_own_clock(open_tablet: OpenTablet, make_batch: MakeBatch, clock) -> None:
    copy = open_tablet(segment_max_age_ms=1000)
    copy.append(make_batch(1))
    clock.now += 5000
    copy.following = True
    assert not copy.maybe_roll_by_age() and len(copy.segments) == 1
    copy.following = False
    assert copy.maybe_roll_by_age() and len(copy.segments) == 2
