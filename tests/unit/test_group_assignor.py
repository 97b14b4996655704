"""The target assignment of a group's buckets: every bucket to exactly one member, balanced, and
sticky (a member joining or leaving moves only what must move)."""

from __future__ import annotations

from lakelog.consumer_groups import GroupBucket
from lakelog.server.coordinator.groups.bucket_assignor import assign_buckets

SIX = [GroupBucket(1, 0, b) for b in range(6)]


def _check_exact(target: dict[str, set[GroupBucket]], buckets: list[GroupBucket]) -> None:
    held = [b for mine in target.values() for b in mine]
    assert sorted(held) == sorted(buckets), "every bucket to exactly one member"
    sizes = [len(mine) for mine in target.values()]
    assert max(sizes) - min(sizes) <= 1, f"balanced: {sizes}"


def test_three_members_share_six_buckets_two_each() -> None:
    target = assign_buckets(SIX, {"a": set(), "b": set(), "c": set()})
    _check_exact(target, SIX)
    assert all(len(mine) == 2 for mine in target.values())


def test_a_member_joining_takes_only_its_share_from_the_others() -> None:
    before = assign_buckets(SIX, {"a": set(), "b": set()})
    after = assign_buckets(SIX, {**before, "c": set()})
    _check_exact(after, SIX)
    moved = sum(1 for member in ("a", "b") for b in before[member] if b not in after[member])
    assert moved == 2 and len(after["c"]) == 2
    assert after["a"] <= before["a"] and after["b"] <= before["b"]


def test_a_member_leaving_leaves_the_others_what_they_held() -> None:
    before = assign_buckets(SIX, {"a": set(), "b": set(), "c": set()})
    after = assign_buckets(SIX, {"a": before["a"], "b": before["b"]})
    _check_exact(after, SIX)
    assert before["a"] <= after["a"] and before["b"] <= after["b"]


def test_more_members_than_buckets_leaves_some_idle() -> None:
    two = SIX[:2]
    target = assign_buckets(two, {m: set() for m in "abcd"})
    _check_exact(target, two)
    assert sum(1 for mine in target.values() if not mine) == 2


def test_new_buckets_go_to_the_members_with_room() -> None:
    before = assign_buckets(SIX, {"a": set(), "b": set(), "c": set()})
    partition = [GroupBucket(1, 7, b) for b in range(3)]
    after = assign_buckets(SIX + partition, before)
    _check_exact(after, SIX + partition)
    assert all(before[m] <= after[m] for m in before), "nobody loses a bucket when buckets are added"


def test_buckets_that_no_longer_exist_are_dropped() -> None:
    target = assign_buckets(SIX[:3], {"a": set(SIX), "b": set()})
    _check_exact(target, SIX[:3])


def test_no_member_no_assignment() -> None:
    assert assign_buckets(SIX, {}) == {}
