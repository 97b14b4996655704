"""Protobuf <-> lakelog dataclasses, for the metadata both edges exchange.

Protobuf types stop at the RPC edges: the servers' handlers and the client's RPC layer convert
with these functions, and everything inside works on the dataclasses of lakelog.metadata.
"""

from __future__ import annotations

from typing import Iterable

import pyarrow as pa

from lakelog.consumer_groups import (
    GroupBucket,
    GroupBucketState,
    GroupDescription,
    GroupMember,
    GroupSummary,
    HeartbeatAnswer,
)
from lakelog.errors import InvalidRequestError
from lakelog.lake_config import CATALOG_NAME, LakeConfig
from lakelog.cluster_state import BucketReplicas, LakeOffsets, ServerNode, TableAssignment
from lakelog.fetch_info import LakeLogFetchInfo, RemoteLogFetchInfo, RemoteLogSegment
from lakelog.metadata import (
    BucketInfo,
    LakeBucketKey,
    LakeBucketOffset,
    LakeSnapshot,
    PartitionInfo,
    TableChange,
    TableInfo,
    TablePath,
    lake_bucket_key,
    lake_bucket_order,
    split_lake_bucket_key,
)
from lakelog.record.schema_bytes import schema_from_bytes, schema_to_bytes
from lakelog.rpc import lakelog_api_pb2 as pb


def path_to_pb(path: TablePath) -> pb.PbTablePath:
    return pb.PbTablePath(database_name=path.database, table_name=path.table)


def path_from_pb(message: pb.PbTablePath) -> TablePath:
    return TablePath(message.database_name, message.table_name)


def properties_to_pb(properties: dict[str, str]) -> list[pb.PbKeyValue]:
    return [pb.PbKeyValue(key=key, value=value) for key, value in sorted(properties.items())]


def properties_from_pb(values: list[pb.PbKeyValue]) -> dict[str, str]:
    return {item.key: item.value for item in values}


def table_change_to_pb(change: TableChange) -> pb.PbTableChange:
    column = schema_to_bytes(pa.schema([pa.field(change.name, change.type)]))
    return pb.PbTableChange(kind=change.kind, column_name=change.name, column_type=column, comment=change.comment)


def table_change_from_pb(message: pb.PbTableChange, where: str) -> TableChange:
    schema = schema_from_bytes(message.column_type)
    if len(schema) != 1:
        raise InvalidRequestError(f"{where}: column_type holds {len(schema)} fields, not 1")
    return TableChange(message.kind, message.column_name, schema.field(0).type, message.comment)


def table_info_to_pb(info: TableInfo) -> pb.PbTableInfo:
    return pb.PbTableInfo(
        table_id=info.table_id,
        table_path=path_to_pb(info.path),
        schema=schema_to_bytes(info.schema),
        schema_id=info.schema_id,
        bucket_count=info.buckets,
        properties=properties_to_pb(dict(info.properties)),
        comment=info.comment,
        created_time=info.created_ms,
        bucket_keys=list(info.bucket_keys),
        partition_keys=list(info.partition_keys),
        partition_id=info.partition_id or 0,
        partition_name=info.partition_name,
    )


def table_info_from_pb(message: pb.PbTableInfo) -> TableInfo:
    return TableInfo(
        table_id=message.table_id,
        path=path_from_pb(message.table_path),
        schema=schema_from_bytes(message.schema),
        schema_id=message.schema_id,
        buckets=message.bucket_count,
        properties=properties_from_pb(list(message.properties)),
        comment=message.comment,
        created_ms=message.created_time,
        bucket_keys=tuple(message.bucket_keys),
        partition_keys=tuple(message.partition_keys),
        partition_id=message.partition_id or None,
        partition_name=message.partition_name,
    )


def partition_spec_to_pb(spec: dict[str, str]) -> pb.PbPartitionSpec:
    return pb.PbPartitionSpec(partition_key_values=properties_to_pb(spec))


def partition_spec_from_pb(message: pb.PbPartitionSpec) -> dict[str, str]:
    return properties_from_pb(list(message.partition_key_values))


def partition_info_to_pb(info: PartitionInfo) -> pb.PbPartitionInfo:
    return pb.PbPartitionInfo(partition_id=info.partition_id, partition_name=info.partition_name, lake_only=info.lake_only)


def partition_info_from_pb(message: pb.PbPartitionInfo) -> PartitionInfo:
    return PartitionInfo(message.partition_id, message.partition_name, message.lake_only)


def node_to_pb(node: ServerNode) -> pb.PbServerNode:
    return pb.PbServerNode(node_id=node.server_id, host=node.host, port=node.port)


def node_from_pb(message: pb.PbServerNode) -> ServerNode:
    return ServerNode(message.node_id, message.host, message.port)


def table_metadata_to_pb(assignment: TableAssignment) -> pb.PbTableMetadata:
    return pb.PbTableMetadata(
        table_info=table_info_to_pb(assignment.info),
        bucket_metadata=[bucket_metadata_to_pb(b, leader, assignment.replicas.get(b)) for b, leader in sorted(assignment.leaders.items())],
    )


def bucket_metadata_to_pb(bucket: int, leader: int, replicas: BucketReplicas | None) -> pb.PbBucketMetadata:
    if replicas is None:
        return pb.PbBucketMetadata(bucket_id=bucket, leader_id=leader)
    return pb.PbBucketMetadata(
        bucket_id=bucket,
        leader_id=leader,
        replica_id=replicas.replicas,
        isr=replicas.isr,
        leader_epoch=replicas.leader_epoch,
        isr_version=replicas.isr_version,
    )


def bucket_replicas_from_pb(item: pb.PbBucketMetadata) -> BucketReplicas | None:
    """None for a bucket its leader alone keeps."""
    if not item.replica_id:
        return None
    return BucketReplicas(tuple(item.replica_id), tuple(item.isr), item.leader_epoch, item.isr_version)


def table_metadata_from_pb(message: pb.PbTableMetadata) -> TableAssignment:
    leaders = {item.bucket_id: item.leader_id for item in message.bucket_metadata}
    replicas = {item.bucket_id: found for item in message.bucket_metadata if (found := bucket_replicas_from_pb(item)) is not None}
    return TableAssignment(table_info_from_pb(message.table_info), leaders, replicas)


def lake_buckets_to_pb(snapshot: LakeSnapshot) -> list[pb.PbLakeTableOffsetForBucket]:
    """A bucket of a partition carries its ``partition_id`` (0: a table without partitions)."""
    return [
        pb.PbLakeTableOffsetForBucket(
            partition_id=partition_id or 0,
            bucket_id=bucket,
            log_start_offset=o.log_start_offset,
            log_end_offset=o.log_end_offset,
            log_max_timestamp=o.log_max_timestamp,
        )
        for (partition_id, bucket), o in (
            (split_lake_bucket_key(key), o) for key, o in sorted(snapshot.bucket_offsets.items(), key=lambda item: lake_bucket_order(item[0]))
        )
    ]


def lake_snapshot_from_pb(snapshot_id: int, buckets: Iterable[pb.PbLakeTableOffsetForBucket]) -> LakeSnapshot:
    return LakeSnapshot(
        snapshot_id,
        {
            lake_bucket_key(b.partition_id or None, b.bucket_id): LakeBucketOffset(b.log_start_offset, b.log_end_offset, b.log_max_timestamp)
            for b in buckets
        },
    )


def lake_offsets_to_pb(tables: Iterable[LakeOffsets]) -> pb.NotifyLakeTableOffsetRequest:
    """What NotifyLakeTableOffset and RegisterTabletServer carry."""
    return pb.NotifyLakeTableOffsetRequest(
        notify_buckets_req=[
            pb.PbNotifyLakeTableOffsetReqForBucket(
                table_id=table.table_id,
                partition_id=table.partition_id or 0,
                bucket_id=bucket,
                snapshot_id=table.snapshot.snapshot_id,
                log_start_offset=o.log_start_offset,
                log_end_offset=o.log_end_offset,
                log_max_timestamp=o.log_max_timestamp,
            )
            for table in tables
            for bucket, o in sorted(table.snapshot.bucket_offsets.items())
        ]
    )


def lake_offsets_from_pb(message: pb.NotifyLakeTableOffsetRequest) -> list[LakeOffsets]:
    """The reverse of :func:`lake_offsets_to_pb`: one lake snapshot per (table, partition, snapshot id)."""
    grouped: dict[tuple[int, int, int], dict[LakeBucketKey, LakeBucketOffset]] = {}
    for item in message.notify_buckets_req:
        grouped.setdefault((item.table_id, item.partition_id, item.snapshot_id), {})[item.bucket_id] = LakeBucketOffset(
            item.log_start_offset, item.log_end_offset, item.log_max_timestamp
        )
    return [
        LakeOffsets(table_id, LakeSnapshot(snapshot_id, buckets), partition_id or None)
        for (table_id, partition_id, snapshot_id), buckets in grouped.items()
    ]


def lake_config_to_pb(config: LakeConfig) -> pb.GetLakeConfigResponse:
    return pb.GetLakeConfigResponse(
        datalake_format=config.format,
        catalog_properties=properties_to_pb(dict(config.catalog_properties)),
        spark_master=config.spark_master,
        remote_fs_properties=properties_to_pb(dict(config.remote_fs)),
        server_host=config.server_host,
        catalog_name=config.catalog_name,
    )


def lake_config_from_pb(message: pb.GetLakeConfigResponse) -> LakeConfig:
    return LakeConfig(
        message.datalake_format,
        properties_from_pb(list(message.catalog_properties)),
        message.spark_master,
        properties_from_pb(list(message.remote_fs_properties)),
        message.server_host,
        message.catalog_name or CATALOG_NAME,
    )


def bucket_info_to_pb(bucket: int, info: BucketInfo, local_segments: int, remote_segments: int) -> pb.PbLogBucketInfo:
    return pb.PbLogBucketInfo(
        bucket_id=bucket,
        leader_id=info.leader,
        high_watermark=info.high_watermark,
        local_log_start_offset=info.local_log_start_offset,
        remote_log_start_offset=info.remote_log_start_offset,
        remote_log_end_offset=info.remote_log_end_offset,
        lake_log_start_offset=info.lake_log_start_offset,
        lake_log_end_offset=info.lake_log_end_offset,
        local_segment_count=local_segments,
        remote_segment_count=remote_segments,
        remote_error=info.remote_error,
        replicas=info.replicas,
        isr=info.isr,
        leader_epoch=info.leader_epoch,
    )


def bucket_info_from_pb(item: pb.PbLogBucketInfo) -> BucketInfo:
    return BucketInfo(
        leader=item.leader_id,
        high_watermark=item.high_watermark,
        local_log_start_offset=item.local_log_start_offset,
        remote_log_start_offset=item.remote_log_start_offset,
        remote_log_end_offset=item.remote_log_end_offset,
        lake_log_start_offset=item.lake_log_start_offset,
        lake_log_end_offset=item.lake_log_end_offset,
        remote_error=item.remote_error,
        replicas=tuple(item.replicas),
        isr=tuple(item.isr),
        leader_epoch=item.leader_epoch,
    )


def remote_fetch_info_to_pb(info: RemoteLogFetchInfo | None) -> pb.PbRemoteLogFetchInfo | None:
    """Only the URI of the bucket's remote directory goes out: the client reaches storage with its own settings."""
    if info is None:
        return None
    return pb.PbRemoteLogFetchInfo(
        remote_log_tablet_dir=info.remote_log_tablet_dir,
        partition_name=info.partition_name,
        remote_log_segments=[
            pb.PbRemoteLogSegment(
                remote_log_segment_id=segment.segment_id,
                remote_log_start_offset=segment.start_offset,
                remote_log_end_offset=segment.end_offset,
                segment_size_in_bytes=segment.size_in_bytes,
                max_timestamp=segment.max_timestamp,
            )
            for segment in info.segments
        ],
        first_start_pos=info.first_start_pos,
    )


def remote_fetch_info_from_pb(item: pb.PbFetchLogRespForBucket) -> RemoteLogFetchInfo | None:
    """None when the answer points at no remote segment."""
    if not item.HasField("remote_log_fetch_info") or not item.remote_log_fetch_info.remote_log_segments:
        return None
    info = item.remote_log_fetch_info
    segments = tuple(
        RemoteLogSegment(
            segment_id=s.remote_log_segment_id,
            start_offset=s.remote_log_start_offset,
            end_offset=s.remote_log_end_offset,
            max_timestamp=s.max_timestamp,
            size_in_bytes=s.segment_size_in_bytes,
        )
        for s in info.remote_log_segments
    )
    return RemoteLogFetchInfo(info.remote_log_tablet_dir, segments, info.first_start_pos, info.partition_name)


def lake_fetch_info_to_pb(info: LakeLogFetchInfo | None) -> pb.PbLakeLogFetchInfo | None:
    if info is None:
        return None
    return pb.PbLakeLogFetchInfo(snapshot_id=info.snapshot_id, log_end_offset=info.log_end_offset)


def lake_fetch_info_from_pb(item: pb.PbFetchLogRespForBucket) -> LakeLogFetchInfo | None:
    if not item.HasField("lake_log_fetch_info"):
        return None
    return LakeLogFetchInfo(item.lake_log_fetch_info.snapshot_id, item.lake_log_fetch_info.log_end_offset)



# consumer groups


def _group_bucket(table_id: int, partition_id: int, bucket: int) -> GroupBucket:
    if partition_id < 0 or bucket < 0:
        raise InvalidRequestError(f"table {table_id}: no bucket {bucket} of partition {partition_id} (both are >= 0)")
    return GroupBucket(table_id, partition_id, bucket)


def group_buckets_from_pb(table_id: int, items: Iterable[pb.PbGroupBucket]) -> list[GroupBucket]:
    return [_group_bucket(table_id, item.partition_id, item.bucket_id) for item in items]


def group_buckets_to_pb(buckets: Iterable[GroupBucket]) -> list[pb.PbGroupBucket]:
    return [pb.PbGroupBucket(partition_id=b.partition_id, bucket_id=b.bucket) for b in sorted(buckets)]


def group_offsets_from_pb(table_id: int, items: Iterable[pb.PbGroupOffset]) -> dict[GroupBucket, int]:
    return {_group_bucket(table_id, item.partition_id, item.bucket_id): item.offset for item in items}


def group_offsets_to_pb(offsets: dict[GroupBucket, int]) -> list[pb.PbGroupOffset]:
    return [pb.PbGroupOffset(partition_id=b.partition_id, bucket_id=b.bucket, offset=o) for b, o in sorted(offsets.items())]


def heartbeat_answer_to_pb(answer: HeartbeatAnswer) -> pb.GroupHeartbeatResponse:
    return pb.GroupHeartbeatResponse(
        member_id=answer.member_id,
        member_epoch=answer.member_epoch,
        assigned=group_buckets_to_pb(answer.assigned),
        reconciling=answer.reconciling,
    )


def heartbeat_answer_from_pb(table_id: int, message: pb.GroupHeartbeatResponse) -> HeartbeatAnswer:
    return HeartbeatAnswer(
        message.member_id, message.member_epoch, frozenset(group_buckets_from_pb(table_id, message.assigned)), message.reconciling
    )


def group_summary_to_pb(summary: GroupSummary) -> pb.PbGroupSummary:
    return pb.PbGroupSummary(group_id=summary.group_id, members=summary.members, lag=summary.lag)


def group_summary_from_pb(message: pb.PbGroupSummary) -> GroupSummary:
    return GroupSummary(message.group_id, message.members, message.lag)


def _or_minus_one(value: int | None) -> int:
    return -1 if value is None else value


def _or_none(value: int) -> int | None:
    return None if value < 0 else value


def group_description_to_pb(description: GroupDescription) -> pb.DescribeGroupResponse:
    return pb.DescribeGroupResponse(
        group_epoch=description.group_epoch,
        members=[
            pb.PbGroupMember(
                member_id=m.member_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                table_id=m.table_id,
                buckets=group_buckets_to_pb(m.buckets),
                table_path=path_to_pb(m.table),
            )
            for m in description.members
        ],
        buckets=[
            pb.PbGroupBucketState(
                table_id=s.bucket.table_id,
                partition_id=s.bucket.partition_id,
                bucket_id=s.bucket.bucket,
                committed=_or_minus_one(s.committed),
                high_watermark=_or_minus_one(s.high_watermark),
                lag=_or_minus_one(s.lag),
                member_id=s.member_id or "",
                table_path=path_to_pb(s.table),
            )
            for s in description.buckets
        ],
    )


def group_description_from_pb(group_id: str, message: pb.DescribeGroupResponse) -> GroupDescription:
    members = tuple(
        GroupMember(m.member_id, m.member_epoch, m.client_id, m.table_id, path_from_pb(m.table_path), tuple(group_buckets_from_pb(m.table_id, m.buckets)))
        for m in message.members
    )
    buckets = tuple(
        GroupBucketState(
            path_from_pb(s.table_path),
            GroupBucket(s.table_id, s.partition_id, s.bucket_id),
            _or_none(s.committed),
            _or_none(s.high_watermark),
            _or_none(s.lag),
            s.member_id or None,
        )
        for s in message.buckets
    )
    return GroupDescription(group_id, message.group_epoch, members, buckets)
