"""The leader's ISR and high-watermark rules alone, on a hand-driven clock."""

from __future__ import annotations

from lakelog.cluster_state import BucketReplicas
from lakelog.server.replica.in_sync_replicas import UNKNOWN, InSyncReplicas

LAG_MS = 30_000


def three_in_sync(now_ms: float = 0.0, epoch_start: int = 0) -> InSyncReplicas:
    return InSyncReplicas(1, BucketReplicas((1, 2, 3), (1, 2, 3), leader_epoch=4), epoch_start, now_ms)


def test_the_high_watermark_limit_is_the_smallest_log_end_of_the_isr_followers() -> None:
    isr = three_in_sync()
    assert isr.high_watermark_limit() == UNKNOWN, "nothing is known before the followers fetch"
    isr.fetched(2, 100, 120, 1.0)
    isr.fetched(3, 80, 120, 1.0)
    assert isr.high_watermark_limit() == 80
    isr.update(BucketReplicas((1, 2, 3), (1, 2), 4, 1))
    assert isr.high_watermark_limit() == 100, "a follower outside the ISR does not hold the high watermark back"
    isr.update(BucketReplicas((1, 2, 3), (1,), 4, 2))
    assert isr.high_watermark_limit() is None


def test_a_follower_that_keeps_pace_with_a_leader_that_keeps_appending_stays_in_sync() -> None:
    isr = three_in_sync()
    for second in range(1, 100):  # always one fetch behind the leader's end, never at it
        isr.fetched(2, second * 10, second * 10 + 5, second * 1000.0)
        isr.fetched(3, second * 10 + 5, second * 10 + 5, second * 1000.0)
    assert isr.lagging(100_000.0, LAG_MS) == ()
    assert isr.wanted_isr(100_000.0, LAG_MS, 990) is None


def test_a_follower_that_stops_fetching_leaves_after_the_lag_time_and_rejoins_once_caught_up() -> None:
    isr = three_in_sync()
    isr.fetched(2, 50, 50, 1_000.0)
    isr.fetched(3, 50, 50, 1_000.0)
    isr.fetched(2, 90, 90, 31_000.0)
    assert isr.wanted_isr(31_000.0, LAG_MS, 50) is None, "30 s without catching up is not more than the lag time"
    assert isr.wanted_isr(31_001.0, LAG_MS, 50) == (1, 2)
    isr.update(BucketReplicas((1, 2, 3), (1, 2), 4, 1))
    isr.fetched(3, 80, 120, 32_000.0)
    assert isr.wanted_isr(32_000.0, LAG_MS, 90) is None, "behind the high watermark: not yet"
    isr.fetched(3, 90, 120, 33_000.0)
    assert isr.wanted_isr(33_000.0, LAG_MS, 90) == (1, 2, 3)


def test_a_follower_joins_only_once_it_holds_what_this_leader_appended_in_its_epoch() -> None:
    isr = InSyncReplicas(1, BucketReplicas((1, 2), (1,), 7, 3), epoch_start_offset=200, now_ms=0.0)
    isr.fetched(2, 150, 230, 1.0)
    assert isr.caught_up(150) == ()
    isr.fetched(2, 200, 230, 2.0)
    assert isr.caught_up(150) == (2,)


def test_a_fetch_from_a_server_that_holds_no_copy_changes_nothing() -> None:
    isr = three_in_sync()
    isr.fetched(9, 500, 500, 1.0)
    assert isr.follower_log_end(9) == UNKNOWN and isr.high_watermark_limit() == UNKNOWN


def test_a_follower_that_left_the_isr_must_fetch_again_before_it_rejoins() -> None:
    isr = three_in_sync()
    isr.fetched(3, 500, 500, 1.0)
    isr.update(BucketReplicas((1, 2, 3), (1, 2), 4, 1))  # 3 restarted, maybe with an empty disk
    assert isr.follower_log_end(3) == UNKNOWN and isr.caught_up(400) == ()
    isr.fetched(3, 0, 500, 2.0)
    assert isr.caught_up(400) == ()
    isr.fetched(3, 500, 500, 3.0)
    assert isr.caught_up(400) == (3,)
