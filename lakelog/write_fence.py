"""Fencing a table's or partition's writes while its leaders keep it (docs/contract.md, "Partitioned tables and bucket keys").

Before the coordinator drops a lake-enabled partition's log it checks that the lake holds all of
it; a write acknowledged after that check would go with the log. So it fences the partition's
writes first: it tells each leader its buckets again with the leader id :func:`fenced_leader` of
its own. The leader then keeps the buckets, answers reads, offsets and descriptions, and refuses
appends (retriably) until it is told the plain leader id again or the partition is dropped.

An append may be past the leader's first checks when the fence lands, or in the log but not yet
durable. So the leader checks the fence again under each log's append lock, and answers the fence
only once every append it let in before is durable: the high watermarks the coordinator reads next
are final.
"""

from __future__ import annotations

from typing import Mapping


def fenced_leader(server_id: int) -> int:
    """The leader id that tells ``server_id`` to keep its buckets but take no writes (ids are >= 0)."""
    return -1 - server_id


def fenced_leaders(leaders: Mapping[int, int]) -> dict[int, int]:
    """``leaders`` (bucket -> server id) with every bucket fenced on its leader."""
    return {bucket: fenced_leader(leader) for bucket, leader in leaders.items()}
