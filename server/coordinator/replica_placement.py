"""Where a table's or partition's bucket copies go: each bucket's replicas on distinct tablet
servers, the leaders (each bucket's first replica) spread evenly over the servers.

Bucket ``b`` of a placement starting at ``start`` is led by server ``(start + b) mod n`` and copied
to the next ``factor - 1`` servers in id order, as Kafka and Fluss place them without racks: every
server leads about ``buckets / n`` buckets and holds about ``buckets * factor / n`` copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from lakelog.errors import InvalidReplicationFactorError, NoTabletServerError
from lakelog.cluster_state import BucketReplicas


@dataclass(frozen=True)
class Placement:
    """Each bucket's leader, and for a factor above 1 its replicas."""

    leaders: dict[int, int]
    replicas: dict[int, BucketReplicas] = field(default_factory=dict)


def place_buckets(what: str, buckets: int, start: int, servers: Sequence[int], live: Sequence[int], factor: int) -> Placement:
    """Place ``buckets`` buckets of ``what`` with ``factor`` copies each. ``servers`` are every
    registered tablet server, ``live`` those heartbeating now: a single copy goes round robin over
    every registered server (a server down now is expected back), several copies only over live ones,
    and a factor above their number is refused."""
    if not servers:
        raise NoTabletServerError(f"cannot create {what}: no tablet server has registered yet")
    if factor == 1:
        ordered = sorted(servers)
        return Placement({b: ordered[(start + b) % len(ordered)] for b in range(buckets)})
    candidates = sorted(live)
    if not 1 <= factor <= len(candidates):
        raise InvalidReplicationFactorError(
            f"cannot create {what}: replication factor {factor} needs {factor} live tablet servers,"
            f" {len(candidates)} are live ({', '.join(map(str, candidates)) or 'none'})"
        )
    replicas = {}
    for b in range(buckets):
        first = (start + b) % len(candidates)
        copies = tuple(candidates[(first + i) % len(candidates)] for i in range(factor))
        replicas[b] = BucketReplicas(copies, copies)  # all in sync: every log is empty
    return Placement({b: r.replicas[0] for b, r in replicas.items()}, replicas)
