"""What the coordinator, the client and the CLI say about consumer groups (docs/contract.md,
"Consumer groups"): plain dataclasses on both sides of the wire."""

from __future__ import annotations

from dataclasses import dataclass

from lakelog.metadata import TablePath


@dataclass(frozen=True, order=True, slots=True)
class GroupBucket:
    """A bucket a group shares out: of a table, or of one of its partitions (``partition_id`` 0:
    a table without partitions, as on the wire)."""

    table_id: int
    partition_id: int
    bucket: int

    def public_key(self) -> int | tuple[int, int]:
        """As scanners key buckets: the number, or ``(partition_id, bucket)`` on a partitioned table."""
        return (self.partition_id, self.bucket) if self.partition_id else self.bucket

    def __str__(self) -> str:
        partition = f" partition {self.partition_id}" if self.partition_id else ""
        return f"table {self.table_id}{partition} bucket {self.bucket}"


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    """What a member may read until its next heartbeat, and the epoch its next one sends."""

    member_id: str
    member_epoch: int
    assigned: frozenset[GroupBucket]
    reconciling: bool = False  # buckets of its target are still being given up by others: heartbeat again soon


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    member_epoch: int
    client_id: str
    table_id: int
    table: TablePath
    buckets: tuple[GroupBucket, ...]


@dataclass(frozen=True, slots=True)
class GroupBucketState:
    """One bucket of a group's table: its committed offset, high watermark and lag (None: no
    commit, or its leader did not answer) and the member reading it (None: none)."""

    table: TablePath
    bucket: GroupBucket
    committed: int | None
    high_watermark: int | None
    lag: int | None
    member_id: str | None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    group_epoch: int
    members: tuple[GroupMember, ...]
    buckets: tuple[GroupBucketState, ...]

    @property
    def lag(self) -> int:
        """Records the group has yet to commit, over the buckets whose lag is known."""
        return sum(state.lag for state in self.buckets if state.lag is not None)


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    members: int
    lag: int


def bucket_lag(committed: int | None, high_watermark: int | None) -> int | None:
    """A bucket's lag: its high watermark minus the group's committed offset; a bucket without a
    commit counts from offset 0 (every record of it is still to be read)."""
    if high_watermark is None:
        return None
    return max(high_watermark - (committed or 0), 0)
