"""What the consumer groups need to know of the coordinator's tables: a table's buckets (every
partition's, lake-only ones included: a group reads a table's whole history), their high
watermarks (asked of the tablet servers that lead them, now) and a table's path."""

from __future__ import annotations

from lakelog.consumer_groups import GroupBucket
from lakelog.metadata import TablePath
from lakelog.server.coordinator.bucket_describer import BucketDescriber, describe_assignment
from lakelog.server.coordinator.coordinator import Coordinator


class GroupTables:
    def __init__(self, coordinator: Coordinator, tablets: BucketDescriber) -> None:
        self._coordinator = coordinator
        self._tablets = tablets

    def buckets(self, table_id: int) -> list[GroupBucket]:
        info = self._coordinator.table_by_id(table_id)
        if not info.partitioned:
            return [GroupBucket(table_id, 0, bucket) for bucket in range(info.buckets)]
        partitions = self._coordinator.list_partitions_of(info)
        return [GroupBucket(table_id, p.partition_id, bucket) for p in partitions for bucket in range(info.buckets)]

    def high_watermarks(self, table_id: int) -> dict[GroupBucket, int]:
        """The buckets whose leader is up and answered."""
        info = self._coordinator.table_by_id(table_id)
        nodes = {node.server_id: node for node in self._coordinator.tablet_servers()}
        down = self._coordinator.liveness.down()
        reachable = {server_id: node for server_id, node in nodes.items() if server_id not in down}
        assignments = self._coordinator.assignments(info)
        marks: dict[GroupBucket, int] = {}
        for assignment in assignments[1:] if info.partitioned else assignments:
            partition_id = assignment.info.partition_id or 0
            for bucket, described in describe_assignment(self._tablets, assignment, reachable).items():
                if described.leader_available:
                    marks[GroupBucket(table_id, partition_id, bucket)] = described.high_watermark
        return marks

    def path(self, table_id: int) -> TablePath:
        return self._coordinator.table_by_id(table_id).path
