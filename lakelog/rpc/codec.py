"""Protobuf <-> lakelog dataclasses, for the metadata both edges exchange.

Protobuf types stop at the RPC edges: the servers' handlers and the client's RPC layer convert
with these functions, and everything inside works on the dataclasses of lakelog.metadata.
"""

from __future__ import annotations

from lakelog.metadata import ServerNode, TableInfo, TablePath, schema_from_bytes, schema_to_bytes
from lakelog.rpc import lakelog_api_pb2 as pb


def path_to_pb(path: TablePath) -> pb.PbTablePath:
    return pb.PbTablePath(database_name=path.database, table_name=path.table)


def path_from_pb(message: pb.PbTablePath) -> TablePath:
    return TablePath(message.database_name, message.table_name)


def properties_to_pb(properties: dict[str, str]) -> list[pb.PbKeyValue]:
    return [pb.PbKeyValue(key=key, value=value) for key, value in sorted(properties.items())]


def properties_from_pb(values: list[pb.PbKeyValue]) -> dict[str, str]:
    return {item.key: item.value for item in values}


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
    )


def node_to_pb(node: ServerNode) -> pb.PbServerNode:
    return pb.PbServerNode(node_id=node.server_id, host=node.host, port=node.port)


def node_from_pb(message: pb.PbServerNode) -> ServerNode:
    return ServerNode(message.node_id, message.host, message.port)


def table_metadata_to_pb(info: TableInfo, leaders: dict[int, int]) -> pb.PbTableMetadata:
    return pb.PbTableMetadata(
        table_info=table_info_to_pb(info),
        bucket_metadata=[pb.PbBucketMetadata(bucket_id=b, leader_id=leader) for b, leader in sorted(leaders.items())],
    )


def table_metadata_from_pb(message: pb.PbTableMetadata) -> tuple[TableInfo, dict[int, int]]:
    leaders = {item.bucket_id: item.leader_id for item in message.bucket_metadata}
    return table_info_from_pb(message.table_info), leaders
