"""The target assignment of one table's buckets among a group's members: balanced (member bucket
counts differ by at most one) and sticky (a member keeps what it holds up to its share), so a
member joining or leaving moves only the buckets that must move."""

from __future__ import annotations

from typing import Iterable, Mapping

from lakelog.consumer_groups import GroupBucket


def assign_buckets(buckets: Iterable[GroupBucket], holding: Mapping[str, Iterable[GroupBucket]]) -> dict[str, set[GroupBucket]]:
    """Every bucket of ``buckets`` to exactly one member of ``holding`` (member id -> what it
    holds now). Members that hold more get the larger shares first; ties go by member id."""
    members = sorted(holding)
    if not members:
        return {}
    pool = sorted(set(buckets))
    floor, extra = divmod(len(pool), len(members))
    available = set(pool)
    kept = {member: sorted(b for b in holding[member] if b in available) for member in members}
    # The members that hold the most are the ones allowed one bucket above the floor.
    by_holding = sorted(members, key=lambda m: (-len(kept[m]), m))
    quota = {member: floor + (1 if rank < extra else 0) for rank, member in enumerate(by_holding)}
    target: dict[str, set[GroupBucket]] = {}
    for member in members:
        mine: set[GroupBucket] = set()
        for bucket in kept[member]:
            if len(mine) < quota[member] and bucket in available:
                mine.add(bucket)
                available.discard(bucket)
        target[member] = mine
    free = iter(sorted(available))
    for member in by_holding:
        while len(target[member]) < quota[member]:
            target[member].add(next(free))
    return target
