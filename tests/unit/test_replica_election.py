"""Elections and ISR changes of the coordinator alone."""

from __future__ import annotations

from lakelog.cluster_state import BucketReplicas
from lakelog.server.coordinator.replica_election import preferred_leader, without_server

COPIES = BucketReplicas((1, 2, 3), (1, 2, 3), leader_epoch=5, isr_version=9)


def test_a_lost_follower_leaves_the_isr_and_the_leader_and_its_epoch_stay() -> None:
    assert without_server(1, COPIES, 3, {1, 2}, returning=False) == (1, BucketReplicas((1, 2, 3), (1, 2), 5, 10))


def test_a_lost_leader_is_replaced_by_the_first_live_isr_member_under_the_next_epoch() -> None:
    assert without_server(1, COPIES, 1, {2, 3}, returning=False) == (2, BucketReplicas((1, 2, 3), (2, 3), 6, 10))
    assert without_server(1, COPIES, 1, {3}, returning=False) == (3, BucketReplicas((1, 2, 3), (2, 3), 6, 10))
    outside = BucketReplicas((1, 2, 3), (1, 3), 5, 9)
    assert without_server(1, outside, 1, {2, 3}, returning=False)[0] == 3, "a replica outside the ISR is never elected"


def test_a_leader_lost_with_no_live_isr_member_leaves_the_bucket_offline() -> None:
    alone = BucketReplicas((1, 2, 3), (1,), 5, 9)
    assert without_server(1, alone, 1, {2, 3}, returning=False) is None


def test_a_sole_isr_member_that_restarts_keeps_the_bucket_under_a_new_epoch() -> None:
    alone = BucketReplicas((1, 2, 3), (1,), 5, 9)
    assert without_server(1, alone, 1, {1, 2, 3}, returning=True) == (1, BucketReplicas((1, 2, 3), (1,), 6, 10))


def test_a_server_outside_the_isr_lost_changes_nothing_and_restarted_bumps_the_isr_version() -> None:
    outside = BucketReplicas((1, 2, 3), (1, 2), 5, 9)
    assert without_server(1, outside, 3, {1, 2}, returning=False) is None
    assert without_server(1, outside, 3, {1, 2, 3}, returning=True) == (1, BucketReplicas((1, 2, 3), (1, 2), 5, 10))


def test_the_preferred_leader_returns_once_it_is_in_sync_and_live() -> None:
    led_by_2 = BucketReplicas((1, 2, 3), (2, 3), 6, 10)
    assert preferred_leader(2, led_by_2, {1, 2, 3}) is None, "not in the ISR yet"
    back = BucketReplicas((1, 2, 3), (1, 2, 3), 6, 11)
    assert preferred_leader(2, back, {1, 2, 3}) == (1, BucketReplicas((1, 2, 3), (1, 2, 3), 7, 12))
    assert preferred_leader(1, back, {1, 2, 3}) is None
