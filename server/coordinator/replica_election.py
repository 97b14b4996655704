"""What happens to a replicated bucket when one of its servers is lost or comes back, decided from
the bucket's replicas and ISR alone (Fluss's ``ReplicaLeaderElection``, Kafka's clean election).

A lost follower leaves the ISR. A lost leader is replaced by the first replica, in replica order,
that is in the ISR and live, under the next leader epoch; with none, the bucket stays offline with
its last leader, which alone may lead it again. A server that restarts lost what it had not
flushed and may come back with an empty disk, so it is treated as lost first; a sole ISR member
keeps the bucket, under a new epoch (what it appended before is told apart from what it appends now).
Every change bumps the ISR version, which a leader's ISR change must name; a follower outside the
ISR that restarts bumps it too, so its leader forgets the log end it had fetched up to.
"""

from __future__ import annotations

from typing import Collection

from lakelog.cluster_state import BucketReplicas


def without_server(leader: int, copies: BucketReplicas, lost: int, live: Collection[int], returning: bool) -> tuple[int, BucketReplicas] | None:
    """The bucket's leader and replicas once ``lost`` is gone (``returning``: it restarted and
    registers again); None when nothing changes."""
    if lost not in copies.isr and lost != leader:
        # A restarted follower outside the ISR: a new ISR version makes its leader forget what it
        # had fetched before (its disk may be empty now).
        return (leader, BucketReplicas(copies.replicas, copies.isr, copies.leader_epoch, copies.isr_version + 1)) if returning else None
    isr = tuple(r for r in copies.isr if r != lost)
    if lost != leader:
        return leader, BucketReplicas(copies.replicas, isr, copies.leader_epoch, copies.isr_version + 1)
    candidates = [r for r in copies.replicas if r in isr and r in live]
    if candidates:
        return candidates[0], BucketReplicas(copies.replicas, isr, copies.leader_epoch + 1, copies.isr_version + 1)
    if returning and copies.isr == (lost,):
        return lost, BucketReplicas(copies.replicas, copies.isr, copies.leader_epoch + 1, copies.isr_version + 1)
    return None


def preferred_leader(leader: int, copies: BucketReplicas, live: Collection[int]) -> tuple[int, BucketReplicas] | None:
    """The bucket led by its first replica again, when that one is in the ISR, live and not leading;
    None otherwise."""
    preferred = copies.replicas[0]
    if preferred == leader or preferred not in copies.isr or preferred not in live:
        return None
    return preferred, BucketReplicas(copies.replicas, copies.isr, copies.leader_epoch + 1, copies.isr_version + 1)
