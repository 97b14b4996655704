"""The cluster's state as the coordinator tells it to tablet servers and clients: which servers
exist, where each bucket's copies live and who leads it, and the lake snapshot a tablet server
serves from. Internal to lakelog: users see the :mod:`lakelog.metadata` descriptors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from lakelog.metadata import LakeSnapshot, TableInfo


@dataclass(frozen=True, slots=True)
class ServerNode:
    server_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class BucketReplicas:
    """Where one bucket's copies live: ``replicas`` (the first is the preferred leader), the in-sync
    replicas ``isr``, the leader epoch (one more each time the leader changes) and the ISR's own
    version, which a leader's ISR change names so a stale one is refused."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int = 0
    isr_version: int = 0


@dataclass(frozen=True)
class TableAssignment:
    """A table and, per bucket, the id of the tablet server that leads it: what the coordinator
    tells tablet servers and clients about placement. ``replicas`` holds the copies of buckets with
    more than one; a bucket it does not name is kept by its leader alone."""

    info: TableInfo
    leaders: Mapping[int, int]
    replicas: Mapping[int, BucketReplicas] = field(default_factory=dict)

    def replicas_of(self, bucket: int) -> BucketReplicas:
        found = self.replicas.get(bucket)
        if found is not None:
            return found
        leader = self.leaders.get(bucket, -1)
        return BucketReplicas((leader,), (leader,))


@dataclass(frozen=True)
class LakeOffsets:
    """A table's (or, with ``partition_id``, one partition's) lake snapshot as NotifyLakeTableOffset
    carries it (to one tablet server: only the buckets it leads), keyed by bucket number."""

    table_id: int
    snapshot: LakeSnapshot
    partition_id: int | None = None

    @property
    def physical_id(self) -> int:
        """What the tablet server keys the buckets' logs by (see :attr:`TableInfo.physical_id`)."""
        return self.table_id if self.partition_id is None else self.partition_id
