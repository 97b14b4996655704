"""How the coordinator asks tablet servers about the buckets of a table or partition: the status
page and the drop of a lake-enabled partition both need every bucket's state now, one call per
leader, with the buckets of a leader that did not answer marked unavailable rather than failing."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Mapping, Protocol

from lakelog.cluster_state import ServerNode, TableAssignment
from lakelog.metadata import BucketInfo


class BucketDescriber(Protocol):
    """How the coordinator asks a tablet server about buckets (gRPC in production)."""

    def describe_buckets(self, node: ServerNode, table_id: int, buckets: Iterable[int], partition_id: int = 0) -> dict[int, BucketInfo]: ...


def describe_assignment(tablets: BucketDescriber, assignment: TableAssignment, reachable: Mapping[int, ServerNode]) -> dict[int, BucketInfo]:
    """Every bucket of a table or partition, by bucket; those whose leader is not in ``reachable``
    or did not answer are :meth:`BucketInfo.unavailable`."""
    leaders, info = assignment.leaders, assignment.info
    by_leader: dict[int, list[int]] = defaultdict(list)
    for bucket, leader in leaders.items():
        by_leader[leader].append(bucket)
    described: dict[int, BucketInfo] = {}
    for leader, group in by_leader.items():
        if leader in reachable:
            described.update(tablets.describe_buckets(reachable[leader], info.table_id, group, info.partition_id or 0))
    return {bucket: described.get(bucket) or BucketInfo.unavailable(leaders[bucket]) for bucket in sorted(leaders)}
