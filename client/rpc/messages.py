"""What the client's RPCs carry, as lakelog dataclasses (the protobuf messages stay in the gateways).

Answers echo what the caller needs to act on them (a fetch answer its offset), so nothing is
rebuilt from the request that was sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from lakelog.errors import LakelogError
from lakelog.cluster_state import ServerNode, TableAssignment
from lakelog.fetch_info import LakeLogFetchInfo, RemoteLogFetchInfo
from lakelog.record.batch import EncodedBatch
from lakelog.client.table_bucket import TableBucket


@dataclass(frozen=True)
class ClusterMetadata:
    """The coordinator's answer to a metadata request: every tablet server and the tables asked for."""

    servers: dict[int, ServerNode]
    tables: list[TableAssignment]
    unavailable: frozenset[int] = frozenset()


@dataclass(frozen=True)
class FetchRequest:
    """One FetchLog to one leader: ``buckets`` (of any partitions of ``table_id``) as ``(bucket, fetch offset)``."""

    table_id: int
    buckets: Sequence[tuple[TableBucket, int]]
    projection: Sequence[int] = ()
    max_bytes: int = 16 << 20
    bucket_max_bytes: int = 4 << 20
    max_wait_ms: int = 0
    min_bytes: int = 1
    enable_lake: bool = False


@dataclass(frozen=True)
class FetchedBucket:
    """One bucket's fetch answer: records read locally, or where the records are (remote segments,
    the lake), or the error that stopped it. ``records`` may be a view of the received message."""

    bucket: TableBucket
    fetch_offset: int
    records: bytes | memoryview = b""
    high_watermark: int = -1
    log_start_offset: int = -1
    error: LakelogError | None = None
    remote: RemoteLogFetchInfo | None = None
    lake: LakeLogFetchInfo | None = None


@dataclass(frozen=True)
class ProduceBucket:
    """One bucket's encoded batches in a ProduceLog."""

    bucket: int
    batches: Sequence[EncodedBatch]
    partition_id: int = 0  # > 0: the bucket of this partition of the request's table
    pipelined: bool = False  # sent while an earlier request of the bucket was in flight


@dataclass(frozen=True)
class ProduceRequest:
    """One ProduceLog to one tablet server: batches of any of the table's buckets that it leads,
    of any partition; the batches are joined into the request once, as it is serialized."""

    table_id: int
    buckets: Sequence[ProduceBucket]
    timeout_ms: int
    hold_id: str = ""
    writer_token: bytes = b""  # proof of the batches' writer id (see lakelog.security.writer_tokens)
    acks: int = -1  # -1: acknowledged once every in-sync replica holds it; 1 (and 0): once the leader does


@dataclass(frozen=True)
class ProducedBatch:
    """An acknowledged produce: the records got offsets from ``base_offset`` and ``commit_timestamp``."""

    bucket: int
    base_offset: int
    commit_timestamp: int


@dataclass(frozen=True)
class BucketRepair:
    """What a tablet server did to repair one bucket (``summary``), or why it could not (``error``)."""

    bucket: int
    summary: str = ""
    error: LakelogError | None = None


@dataclass(frozen=True)
class ListedOffset:
    """A ListOffsets answer for one bucket (of partition ``partition_id``, 0 for a table's own
    buckets); ``lake_snapshot_id`` >= 0 says the lake must resolve it; ``error``: what the server
    answered instead of an offset."""

    bucket: int
    offset: int
    lake_snapshot_id: int = -1
    partition_id: int = 0
    error: LakelogError | None = None

