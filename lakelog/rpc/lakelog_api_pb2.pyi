from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OffsetType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EARLIEST: _ClassVar[OffsetType]
    LATEST: _ClassVar[OffsetType]
    TIMESTAMP: _ClassVar[OffsetType]

class RepairTier(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPAIR_REMOTE: _ClassVar[RepairTier]
    REPAIR_LOCAL: _ClassVar[RepairTier]
EARLIEST: OffsetType
LATEST: OffsetType
TIMESTAMP: OffsetType
REPAIR_REMOTE: RepairTier
REPAIR_LOCAL: RepairTier

class PbTablePath(_message.Message):
    __slots__ = ("database_name", "table_name")
    DATABASE_NAME_FIELD_NUMBER: _ClassVar[int]
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    database_name: str
    table_name: str
    def __init__(self, database_name: _Optional[str] = ..., table_name: _Optional[str] = ...) -> None: ...

class PbServerNode(_message.Message):
    __slots__ = ("node_id", "host", "port")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    host: str
    port: int
    def __init__(self, node_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class PbKeyValue(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class PbTableInfo(_message.Message):
    __slots__ = ("table_id", "table_path", "schema", "schema_id", "bucket_count", "properties", "comment", "created_time", "bucket_keys", "partition_keys", "partition_id", "partition_name")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_PATH_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_COUNT_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    CREATED_TIME_FIELD_NUMBER: _ClassVar[int]
    BUCKET_KEYS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEYS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_NAME_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    table_path: PbTablePath
    schema: bytes
    schema_id: int
    bucket_count: int
    properties: _containers.RepeatedCompositeFieldContainer[PbKeyValue]
    comment: str
    created_time: int
    bucket_keys: _containers.RepeatedScalarFieldContainer[str]
    partition_keys: _containers.RepeatedScalarFieldContainer[str]
    partition_id: int
    partition_name: str
    def __init__(self, table_id: _Optional[int] = ..., table_path: _Optional[_Union[PbTablePath, _Mapping]] = ..., schema: _Optional[bytes] = ..., schema_id: _Optional[int] = ..., bucket_count: _Optional[int] = ..., properties: _Optional[_Iterable[_Union[PbKeyValue, _Mapping]]] = ..., comment: _Optional[str] = ..., created_time: _Optional[int] = ..., bucket_keys: _Optional[_Iterable[str]] = ..., partition_keys: _Optional[_Iterable[str]] = ..., partition_id: _Optional[int] = ..., partition_name: _Optional[str] = ...) -> None: ...

class PbBucketMetadata(_message.Message):
    __slots__ = ("bucket_id", "leader_id", "replica_id", "isr", "leader_epoch", "isr_version")
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ISR_VERSION_FIELD_NUMBER: _ClassVar[int]
    bucket_id: int
    leader_id: int
    replica_id: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    leader_epoch: int
    isr_version: int
    def __init__(self, bucket_id: _Optional[int] = ..., leader_id: _Optional[int] = ..., replica_id: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., leader_epoch: _Optional[int] = ..., isr_version: _Optional[int] = ...) -> None: ...

class PbTableMetadata(_message.Message):
    __slots__ = ("table_info", "bucket_metadata")
    TABLE_INFO_FIELD_NUMBER: _ClassVar[int]
    BUCKET_METADATA_FIELD_NUMBER: _ClassVar[int]
    table_info: PbTableInfo
    bucket_metadata: _containers.RepeatedCompositeFieldContainer[PbBucketMetadata]
    def __init__(self, table_info: _Optional[_Union[PbTableInfo, _Mapping]] = ..., bucket_metadata: _Optional[_Iterable[_Union[PbBucketMetadata, _Mapping]]] = ...) -> None: ...

class CreateDatabaseRequest(_message.Message):
    __slots__ = ("database_name", "ignore_if_exists", "comment")
    DATABASE_NAME_FIELD_NUMBER: _ClassVar[int]
    IGNORE_IF_EXISTS_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    database_name: str
    ignore_if_exists: bool
    comment: str
    def __init__(self, database_name: _Optional[str] = ..., ignore_if_exists: _Optional[bool] = ..., comment: _Optional[str] = ...) -> None: ...

class CreateDatabaseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DropDatabaseRequest(_message.Message):
    __slots__ = ("database_name", "ignore_if_not_exists", "cascade")
    DATABASE_NAME_FIELD_NUMBER: _ClassVar[int]
    IGNORE_IF_NOT_EXISTS_FIELD_NUMBER: _ClassVar[int]
    CASCADE_FIELD_NUMBER: _ClassVar[int]
    database_name: str
    ignore_if_not_exists: bool
    cascade: bool
    def __init__(self, database_name: _Optional[str] = ..., ignore_if_not_exists: _Optional[bool] = ..., cascade: _Optional[bool] = ...) -> None: ...

class DropDatabaseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListDatabasesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListDatabasesResponse(_message.Message):
    __slots__ = ("database_name",)
    DATABASE_NAME_FIELD_NUMBER: _ClassVar[int]
    database_name: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, database_name: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateTableRequest(_message.Message):
    __slots__ = ("table_path", "schema", "bucket_count", "properties", "comment", "ignore_if_exists", "bucket_keys", "partition_keys")
    TABLE_PATH_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    BUCKET_COUNT_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    IGNORE_IF_EXISTS_FIELD_NUMBER: _ClassVar[int]
    BUCKET_KEYS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEYS_FIELD_NUMBER: _ClassVar[int]
    table_path: PbTablePath
    schema: bytes
    bucket_count: int
    properties: _containers.RepeatedCompositeFieldContainer[PbKeyValue]
    comment: str
    ignore_if_exists: bool
    bucket_keys: _containers.RepeatedScalarFieldContainer[str]
    partition_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, table_path: _Optional[_Union[PbTablePath, _Mapping]] = ..., schema: _Optional[bytes] = ..., bucket_count: _Optional[int] = ..., properties: _Optional[_Iterable[_Union[PbKeyValue, _Mapping]]] = ..., comment: _Optional[str] = ..., ignore_if_exists: _Optional[bool] = ..., bucket_keys: _Optional[_Iterable[str]] = ..., partition_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateTableResponse(_message.Message):
    __slots__ = ("table_id",)
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    def __init__(self, table_id: _Optional[int] = ...) -> None: ...

class DropTableRequest(_message.Message):
    __slots__ = ("table_path", "ignore_if_not_exists")
    TABLE_PATH_FIELD_NUMBER: _ClassVar[int]
    IGNORE_IF_NOT_EXISTS_FIELD_NUMBER: _ClassVar[int]
    table_path: PbTablePath
    ignore_if_not_exists: bool
    def __init__(self, table_path: _Optional[_Union[PbTablePath, _Mapping]] = ..., ignore_if_not_exists: _Optional[bool] = ...) -> None: ...

class DropTableResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTablesRequest(_message.Message):
    __slots__ = ("database_name",)
    DATABASE_NAME_FIELD_NUMBER: _ClassVar[int]
    database_name: str
    def __init__(self, database_name: _Optional[str] = ...) -> None: ...

class ListTablesResponse(_message.Message):
    __slots__ = ("table_name",)
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    table_name: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, table_name: _Optional[_Iterable[str]] = ...) -> None: ...

class PbTableChange(_message.Message):
    __slots__ = ("kind", "column_name", "column_type", "comment")
    KIND_FIELD_NUMBER: _ClassVar[int]
    COLUMN_NAME_FIELD_NUMBER: _ClassVar[int]
    COLUMN_TYPE_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    kind: str
    column_name: str
    column_type: bytes
    comment: str
    def __init__(self, kind: _Optional[str] = ..., column_name: _Optional[str] = ..., column_type: _Optional[bytes] = ..., comment: _Optional[str] = ...) -> None: ...

class AlterTableRequest(_message.Message):
    __slots__ = ("table_path", "changes", "ignore_if_not_exists")
    TABLE_PATH_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    IGNORE_IF_NOT_EXISTS_FIELD_NUMBER: _ClassVar[int]
    table_path: PbTablePath
    changes: _containers.RepeatedCompositeFieldContainer[PbTableChange]
    ignore_if_not_exists: bool
    def __init__(self, table_path: _Optional[_Union[PbTablePath, _Mapping]] = ..., changes: _Optional[_Iterable[_Union[PbTableChange, _Mapping]]] = ..., ignore_if_not_exists: _Optional[bool] = ...) -> None: ...

class AlterTableResponse(_message.Message):
    __slots__ = ("schema_id",)
    SCHEMA_ID_FIELD_NUMBER: _ClassVar[int]
    schema_id: int
    def __init__(self, schema_id: _Optional[int] = ...) -> None: ...

class GetTableSchemaRequest(_message.Message):
    __slots__ = ("table_path", "schema_id")
    TABLE_PATH_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_ID_FIELD_NUMBER: _ClassVar[int]
    table_path: PbTablePath
    schema_id: int
    def __init__(self, table_path: _Optional[_Union[PbTablePath, _Mapping]] = ..., schema_id: _Optional[int] = ...) -> None: ...

class GetTableSchemaResponse(_message.Message):
    __slots__ = ("schema_id", "schema")
    SCHEMA_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    schema_id: int
    schema: bytes
    def __init__(self, schema_id: _Optional[int] = ..., schema: _Optional[bytes] = ...) -> None: ...

class GetTableInfoRequest(_message.Message):
    __slots__ = ("table_path", "table_id")
    TABLE_PATH_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    table_path: PbTablePath
    table_id: int
    def __init__(self, table_path: _Optional[_Union[PbTablePath, _Mapping]] = ..., table_id: _Optional[int] = ...) -> None: ...

class GetTableInfoResponse(_message.Message):
    __slots__ = ("table_info",)
    TABLE_INFO_FIELD_NUMBER: _ClassVar[int]
    table_info: PbTableInfo
    def __init__(self, table_info: _Optional[_Union[PbTableInfo, _Mapping]] = ...) -> None: ...

class MetadataRequest(_message.Message):
    __slots__ = ("table_path", "table_id")
    TABLE_PATH_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    table_path: _containers.RepeatedCompositeFieldContainer[PbTablePath]
    table_id: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, table_path: _Optional[_Iterable[_Union[PbTablePath, _Mapping]]] = ..., table_id: _Optional[_Iterable[int]] = ...) -> None: ...

class MetadataResponse(_message.Message):
    __slots__ = ("coordinator_server", "tablet_servers", "table_metadata", "unavailable_server_ids")
    COORDINATOR_SERVER_FIELD_NUMBER: _ClassVar[int]
    TABLET_SERVERS_FIELD_NUMBER: _ClassVar[int]
    TABLE_METADATA_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_SERVER_IDS_FIELD_NUMBER: _ClassVar[int]
    coordinator_server: PbServerNode
    tablet_servers: _containers.RepeatedCompositeFieldContainer[PbServerNode]
    table_metadata: _containers.RepeatedCompositeFieldContainer[PbTableMetadata]
    unavailable_server_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, coordinator_server: _Optional[_Union[PbServerNode, _Mapping]] = ..., tablet_servers: _Optional[_Iterable[_Union[PbServerNode, _Mapping]]] = ..., table_metadata: _Optional[_Iterable[_Union[PbTableMetadata, _Mapping]]] = ..., unavailable_server_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class RegisterTabletServerRequest(_message.Message):
    __slots__ = ("server",)
    SERVER_FIELD_NUMBER: _ClassVar[int]
    server: PbServerNode
    def __init__(self, server: _Optional[_Union[PbServerNode, _Mapping]] = ...) -> None: ...

class TabletServerHeartbeatRequest(_message.Message):
    __slots__ = ("server_id",)
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    def __init__(self, server_id: _Optional[int] = ...) -> None: ...

class TabletServerHeartbeatResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RegisterTabletServerResponse(_message.Message):
    __slots__ = ("table_metadata", "lake_offsets", "writer_key")
    TABLE_METADATA_FIELD_NUMBER: _ClassVar[int]
    LAKE_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    WRITER_KEY_FIELD_NUMBER: _ClassVar[int]
    table_metadata: _containers.RepeatedCompositeFieldContainer[PbTableMetadata]
    lake_offsets: NotifyLakeTableOffsetRequest
    writer_key: bytes
    def __init__(self, table_metadata: _Optional[_Iterable[_Union[PbTableMetadata, _Mapping]]] = ..., lake_offsets: _Optional[_Union[NotifyLakeTableOffsetRequest, _Mapping]] = ..., writer_key: _Optional[bytes] = ...) -> None: ...

class ProduceLogRequest(_message.Message):
    __slots__ = ("acks", "table_id", "timeout_ms", "buckets_req", "hold_id")
    ACKS_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_REQ_FIELD_NUMBER: _ClassVar[int]
    HOLD_ID_FIELD_NUMBER: _ClassVar[int]
    acks: int
    table_id: int
    timeout_ms: int
    buckets_req: _containers.RepeatedCompositeFieldContainer[PbProduceLogReqForBucket]
    hold_id: str
    def __init__(self, acks: _Optional[int] = ..., table_id: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., buckets_req: _Optional[_Iterable[_Union[PbProduceLogReqForBucket, _Mapping]]] = ..., hold_id: _Optional[str] = ...) -> None: ...

class PbProduceLogReqForBucket(_message.Message):
    __slots__ = ("partition_id", "bucket_id", "records", "writer_token", "pipelined")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    WRITER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PIPELINED_FIELD_NUMBER: _ClassVar[int]
    partition_id: int
    bucket_id: int
    records: bytes
    writer_token: bytes
    pipelined: bool
    def __init__(self, partition_id: _Optional[int] = ..., bucket_id: _Optional[int] = ..., records: _Optional[bytes] = ..., writer_token: _Optional[bytes] = ..., pipelined: _Optional[bool] = ...) -> None: ...

class ProduceLogResponse(_message.Message):
    __slots__ = ("buckets_resp",)
    BUCKETS_RESP_FIELD_NUMBER: _ClassVar[int]
    buckets_resp: _containers.RepeatedCompositeFieldContainer[PbProduceLogRespForBucket]
    def __init__(self, buckets_resp: _Optional[_Iterable[_Union[PbProduceLogRespForBucket, _Mapping]]] = ...) -> None: ...

class PbProduceLogRespForBucket(_message.Message):
    __slots__ = ("partition_id", "bucket_id", "error_code", "error_message", "base_offset", "high_watermark", "commit_timestamp")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    partition_id: int
    bucket_id: int
    error_code: int
    error_message: str
    base_offset: int
    high_watermark: int
    commit_timestamp: int
    def __init__(self, partition_id: _Optional[int] = ..., bucket_id: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., base_offset: _Optional[int] = ..., high_watermark: _Optional[int] = ..., commit_timestamp: _Optional[int] = ...) -> None: ...

class FetchLogRequest(_message.Message):
    __slots__ = ("follower_server_id", "max_bytes", "tables_req", "max_wait_ms", "min_bytes", "enable_lake")
    FOLLOWER_SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    TABLES_REQ_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    ENABLE_LAKE_FIELD_NUMBER: _ClassVar[int]
    follower_server_id: int
    max_bytes: int
    tables_req: _containers.RepeatedCompositeFieldContainer[PbFetchLogReqForTable]
    max_wait_ms: int
    min_bytes: int
    enable_lake: bool
    def __init__(self, follower_server_id: _Optional[int] = ..., max_bytes: _Optional[int] = ..., tables_req: _Optional[_Iterable[_Union[PbFetchLogReqForTable, _Mapping]]] = ..., max_wait_ms: _Optional[int] = ..., min_bytes: _Optional[int] = ..., enable_lake: _Optional[bool] = ...) -> None: ...

class PbFetchLogReqForTable(_message.Message):
    __slots__ = ("table_id", "projected_fields", "buckets_req")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECTED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_REQ_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    projected_fields: _containers.RepeatedScalarFieldContainer[int]
    buckets_req: _containers.RepeatedCompositeFieldContainer[PbFetchLogReqForBucket]
    def __init__(self, table_id: _Optional[int] = ..., projected_fields: _Optional[_Iterable[int]] = ..., buckets_req: _Optional[_Iterable[_Union[PbFetchLogReqForBucket, _Mapping]]] = ...) -> None: ...

class PbFetchLogReqForBucket(_message.Message):
    __slots__ = ("partition_id", "bucket_id", "fetch_offset", "max_fetch_bytes", "leader_epoch")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_FETCH_BYTES_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    partition_id: int
    bucket_id: int
    fetch_offset: int
    max_fetch_bytes: int
    leader_epoch: int
    def __init__(self, partition_id: _Optional[int] = ..., bucket_id: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., max_fetch_bytes: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class FetchLogResponse(_message.Message):
    __slots__ = ("tables_resp",)
    TABLES_RESP_FIELD_NUMBER: _ClassVar[int]
    tables_resp: _containers.RepeatedCompositeFieldContainer[PbFetchLogRespForTable]
    def __init__(self, tables_resp: _Optional[_Iterable[_Union[PbFetchLogRespForTable, _Mapping]]] = ...) -> None: ...

class PbFetchLogRespForTable(_message.Message):
    __slots__ = ("table_id", "buckets_resp")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_RESP_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    buckets_resp: _containers.RepeatedCompositeFieldContainer[PbFetchLogRespForBucket]
    def __init__(self, table_id: _Optional[int] = ..., buckets_resp: _Optional[_Iterable[_Union[PbFetchLogRespForBucket, _Mapping]]] = ...) -> None: ...

class PbFetchLogRespForBucket(_message.Message):
    __slots__ = ("partition_id", "bucket_id", "error_code", "error_message", "high_watermark", "log_start_offset", "remote_log_fetch_info", "records", "lake_log_fetch_info", "fetch_offset", "leader_epoch", "starts_segment", "writer_state")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REMOTE_LOG_FETCH_INFO_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    LAKE_LOG_FETCH_INFO_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    STARTS_SEGMENT_FIELD_NUMBER: _ClassVar[int]
    WRITER_STATE_FIELD_NUMBER: _ClassVar[int]
    partition_id: int
    bucket_id: int
    error_code: int
    error_message: str
    high_watermark: int
    log_start_offset: int
    remote_log_fetch_info: PbRemoteLogFetchInfo
    records: bytes
    lake_log_fetch_info: PbLakeLogFetchInfo
    fetch_offset: int
    leader_epoch: int
    starts_segment: bool
    writer_state: bytes
    def __init__(self, partition_id: _Optional[int] = ..., bucket_id: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., high_watermark: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., remote_log_fetch_info: _Optional[_Union[PbRemoteLogFetchInfo, _Mapping]] = ..., records: _Optional[bytes] = ..., lake_log_fetch_info: _Optional[_Union[PbLakeLogFetchInfo, _Mapping]] = ..., fetch_offset: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., starts_segment: _Optional[bool] = ..., writer_state: _Optional[bytes] = ...) -> None: ...

class PbRemoteLogFetchInfo(_message.Message):
    __slots__ = ("remote_log_tablet_dir", "partition_name", "remote_log_segments", "first_start_pos")
    REMOTE_LOG_TABLET_DIR_FIELD_NUMBER: _ClassVar[int]
    PARTITION_NAME_FIELD_NUMBER: _ClassVar[int]
    REMOTE_LOG_SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    FIRST_START_POS_FIELD_NUMBER: _ClassVar[int]
    remote_log_tablet_dir: str
    partition_name: str
    remote_log_segments: _containers.RepeatedCompositeFieldContainer[PbRemoteLogSegment]
    first_start_pos: int
    def __init__(self, remote_log_tablet_dir: _Optional[str] = ..., partition_name: _Optional[str] = ..., remote_log_segments: _Optional[_Iterable[_Union[PbRemoteLogSegment, _Mapping]]] = ..., first_start_pos: _Optional[int] = ...) -> None: ...

class PbRemoteLogSegment(_message.Message):
    __slots__ = ("remote_log_segment_id", "remote_log_start_offset", "remote_log_end_offset", "segment_size_in_bytes", "max_timestamp")
    REMOTE_LOG_SEGMENT_ID_FIELD_NUMBER: _ClassVar[int]
    REMOTE_LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REMOTE_LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_SIZE_IN_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    remote_log_segment_id: str
    remote_log_start_offset: int
    remote_log_end_offset: int
    segment_size_in_bytes: int
    max_timestamp: int
    def __init__(self, remote_log_segment_id: _Optional[str] = ..., remote_log_start_offset: _Optional[int] = ..., remote_log_end_offset: _Optional[int] = ..., segment_size_in_bytes: _Optional[int] = ..., max_timestamp: _Optional[int] = ...) -> None: ...

class PbLakeLogFetchInfo(_message.Message):
    __slots__ = ("snapshot_id", "log_end_offset")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: int
    log_end_offset: int
    def __init__(self, snapshot_id: _Optional[int] = ..., log_end_offset: _Optional[int] = ...) -> None: ...

class ListOffsetsRequest(_message.Message):
    __slots__ = ("follower_server_id", "offset_type", "table_id", "partition_id", "bucket_id", "start_timestamp", "enable_lake", "partitions_req")
    FOLLOWER_SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_TYPE_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    START_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    ENABLE_LAKE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_REQ_FIELD_NUMBER: _ClassVar[int]
    follower_server_id: int
    offset_type: OffsetType
    table_id: int
    partition_id: int
    bucket_id: _containers.RepeatedScalarFieldContainer[int]
    start_timestamp: int
    enable_lake: bool
    partitions_req: _containers.RepeatedCompositeFieldContainer[PbListOffsetsReqForPartition]
    def __init__(self, follower_server_id: _Optional[int] = ..., offset_type: _Optional[_Union[OffsetType, str]] = ..., table_id: _Optional[int] = ..., partition_id: _Optional[int] = ..., bucket_id: _Optional[_Iterable[int]] = ..., start_timestamp: _Optional[int] = ..., enable_lake: _Optional[bool] = ..., partitions_req: _Optional[_Iterable[_Union[PbListOffsetsReqForPartition, _Mapping]]] = ...) -> None: ...

class PbListOffsetsReqForPartition(_message.Message):
    __slots__ = ("partition_id", "bucket_id")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    partition_id: int
    bucket_id: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition_id: _Optional[int] = ..., bucket_id: _Optional[_Iterable[int]] = ...) -> None: ...

class ListOffsetsResponse(_message.Message):
    __slots__ = ("buckets_resp",)
    BUCKETS_RESP_FIELD_NUMBER: _ClassVar[int]
    buckets_resp: _containers.RepeatedCompositeFieldContainer[PbListOffsetsRespForBucket]
    def __init__(self, buckets_resp: _Optional[_Iterable[_Union[PbListOffsetsRespForBucket, _Mapping]]] = ...) -> None: ...

class PbListOffsetsRespForBucket(_message.Message):
    __slots__ = ("bucket_id", "error_code", "error_message", "offset", "lake_snapshot_id", "partition_id")
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAKE_SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    bucket_id: int
    error_code: int
    error_message: str
    offset: int
    lake_snapshot_id: int
    partition_id: int
    def __init__(self, bucket_id: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., offset: _Optional[int] = ..., lake_snapshot_id: _Optional[int] = ..., partition_id: _Optional[int] = ...) -> None: ...

class DescribeLogBucketsRequest(_message.Message):
    __slots__ = ("table_id", "bucket_id", "partition_id")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    bucket_id: _containers.RepeatedScalarFieldContainer[int]
    partition_id: int
    def __init__(self, table_id: _Optional[int] = ..., bucket_id: _Optional[_Iterable[int]] = ..., partition_id: _Optional[int] = ...) -> None: ...

class DescribeLogBucketsResponse(_message.Message):
    __slots__ = ("buckets",)
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    buckets: _containers.RepeatedCompositeFieldContainer[PbLogBucketInfo]
    def __init__(self, buckets: _Optional[_Iterable[_Union[PbLogBucketInfo, _Mapping]]] = ...) -> None: ...

class PbLogBucketInfo(_message.Message):
    __slots__ = ("bucket_id", "error_code", "error_message", "leader_id", "high_watermark", "local_log_start_offset", "remote_log_start_offset", "remote_log_end_offset", "lake_log_start_offset", "lake_log_end_offset", "local_segment_count", "remote_segment_count", "remote_error", "replicas", "isr", "leader_epoch")
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOCAL_LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REMOTE_LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REMOTE_LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAKE_LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAKE_LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOCAL_SEGMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    REMOTE_SEGMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    REMOTE_ERROR_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    bucket_id: int
    error_code: int
    error_message: str
    leader_id: int
    high_watermark: int
    local_log_start_offset: int
    remote_log_start_offset: int
    remote_log_end_offset: int
    lake_log_start_offset: int
    lake_log_end_offset: int
    local_segment_count: int
    remote_segment_count: int
    remote_error: str
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    leader_epoch: int
    def __init__(self, bucket_id: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., high_watermark: _Optional[int] = ..., local_log_start_offset: _Optional[int] = ..., remote_log_start_offset: _Optional[int] = ..., remote_log_end_offset: _Optional[int] = ..., lake_log_start_offset: _Optional[int] = ..., lake_log_end_offset: _Optional[int] = ..., local_segment_count: _Optional[int] = ..., remote_segment_count: _Optional[int] = ..., remote_error: _Optional[str] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class RepairLogRequest(_message.Message):
    __slots__ = ("table_id", "bucket_id", "tier", "accept_truncation", "partition_id")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_TRUNCATION_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    bucket_id: _containers.RepeatedScalarFieldContainer[int]
    tier: RepairTier
    accept_truncation: bool
    partition_id: int
    def __init__(self, table_id: _Optional[int] = ..., bucket_id: _Optional[_Iterable[int]] = ..., tier: _Optional[_Union[RepairTier, str]] = ..., accept_truncation: _Optional[bool] = ..., partition_id: _Optional[int] = ...) -> None: ...

class RepairLogResponse(_message.Message):
    __slots__ = ("buckets",)
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    buckets: _containers.RepeatedCompositeFieldContainer[PbRepairLogRespForBucket]
    def __init__(self, buckets: _Optional[_Iterable[_Union[PbRepairLogRespForBucket, _Mapping]]] = ...) -> None: ...

class PbRepairLogRespForBucket(_message.Message):
    __slots__ = ("bucket_id", "error_code", "error_message", "summary")
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    bucket_id: int
    error_code: int
    error_message: str
    summary: str
    def __init__(self, bucket_id: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., summary: _Optional[str] = ...) -> None: ...

class NotifyLeaderAndIsrRequest(_message.Message):
    __slots__ = ("table_metadata", "dropped_table_id")
    TABLE_METADATA_FIELD_NUMBER: _ClassVar[int]
    DROPPED_TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    table_metadata: _containers.RepeatedCompositeFieldContainer[PbTableMetadata]
    dropped_table_id: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, table_metadata: _Optional[_Iterable[_Union[PbTableMetadata, _Mapping]]] = ..., dropped_table_id: _Optional[_Iterable[int]] = ...) -> None: ...

class NotifyLeaderAndIsrResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CommitLakeTableSnapshotRequest(_message.Message):
    __slots__ = ("tables_req",)
    TABLES_REQ_FIELD_NUMBER: _ClassVar[int]
    tables_req: _containers.RepeatedCompositeFieldContainer[PbLakeTableSnapshotInfo]
    def __init__(self, tables_req: _Optional[_Iterable[_Union[PbLakeTableSnapshotInfo, _Mapping]]] = ...) -> None: ...

class PbLakeTableSnapshotInfo(_message.Message):
    __slots__ = ("table_id", "snapshot_id", "buckets_req")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_REQ_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    snapshot_id: int
    buckets_req: _containers.RepeatedCompositeFieldContainer[PbLakeTableOffsetForBucket]
    def __init__(self, table_id: _Optional[int] = ..., snapshot_id: _Optional[int] = ..., buckets_req: _Optional[_Iterable[_Union[PbLakeTableOffsetForBucket, _Mapping]]] = ...) -> None: ...

class PbLakeTableOffsetForBucket(_message.Message):
    __slots__ = ("partition_id", "bucket_id", "log_start_offset", "log_end_offset", "log_max_timestamp")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_MAX_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    partition_id: int
    bucket_id: int
    log_start_offset: int
    log_end_offset: int
    log_max_timestamp: int
    def __init__(self, partition_id: _Optional[int] = ..., bucket_id: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., log_max_timestamp: _Optional[int] = ...) -> None: ...

class CommitLakeTableSnapshotResponse(_message.Message):
    __slots__ = ("table_resp",)
    TABLE_RESP_FIELD_NUMBER: _ClassVar[int]
    table_resp: _containers.RepeatedCompositeFieldContainer[PbCommitLakeTableSnapshotRespForTable]
    def __init__(self, table_resp: _Optional[_Iterable[_Union[PbCommitLakeTableSnapshotRespForTable, _Mapping]]] = ...) -> None: ...

class PbCommitLakeTableSnapshotRespForTable(_message.Message):
    __slots__ = ("table_id", "error_code", "error_message")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    error_code: int
    error_message: str
    def __init__(self, table_id: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class GetLakeSnapshotRequest(_message.Message):
    __slots__ = ("table_path",)
    TABLE_PATH_FIELD_NUMBER: _ClassVar[int]
    table_path: PbTablePath
    def __init__(self, table_path: _Optional[_Union[PbTablePath, _Mapping]] = ...) -> None: ...

class GetLakeSnapshotResponse(_message.Message):
    __slots__ = ("table_id", "snapshot_id", "bucket_snapshots")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    snapshot_id: int
    bucket_snapshots: _containers.RepeatedCompositeFieldContainer[PbLakeTableOffsetForBucket]
    def __init__(self, table_id: _Optional[int] = ..., snapshot_id: _Optional[int] = ..., bucket_snapshots: _Optional[_Iterable[_Union[PbLakeTableOffsetForBucket, _Mapping]]] = ...) -> None: ...

class GetLakeConfigRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetLakeConfigResponse(_message.Message):
    __slots__ = ("datalake_format", "catalog_properties", "spark_master", "remote_fs_properties", "server_host", "catalog_name")
    DATALAKE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    CATALOG_PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    SPARK_MASTER_FIELD_NUMBER: _ClassVar[int]
    REMOTE_FS_PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    SERVER_HOST_FIELD_NUMBER: _ClassVar[int]
    CATALOG_NAME_FIELD_NUMBER: _ClassVar[int]
    datalake_format: str
    catalog_properties: _containers.RepeatedCompositeFieldContainer[PbKeyValue]
    spark_master: str
    remote_fs_properties: _containers.RepeatedCompositeFieldContainer[PbKeyValue]
    server_host: str
    catalog_name: str
    def __init__(self, datalake_format: _Optional[str] = ..., catalog_properties: _Optional[_Iterable[_Union[PbKeyValue, _Mapping]]] = ..., spark_master: _Optional[str] = ..., remote_fs_properties: _Optional[_Iterable[_Union[PbKeyValue, _Mapping]]] = ..., server_host: _Optional[str] = ..., catalog_name: _Optional[str] = ...) -> None: ...

class NotifyLakeTableOffsetRequest(_message.Message):
    __slots__ = ("notify_buckets_req",)
    NOTIFY_BUCKETS_REQ_FIELD_NUMBER: _ClassVar[int]
    notify_buckets_req: _containers.RepeatedCompositeFieldContainer[PbNotifyLakeTableOffsetReqForBucket]
    def __init__(self, notify_buckets_req: _Optional[_Iterable[_Union[PbNotifyLakeTableOffsetReqForBucket, _Mapping]]] = ...) -> None: ...

class PbNotifyLakeTableOffsetReqForBucket(_message.Message):
    __slots__ = ("table_id", "partition_id", "bucket_id", "snapshot_id", "log_start_offset", "log_end_offset", "log_max_timestamp")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_MAX_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    partition_id: int
    bucket_id: int
    snapshot_id: int
    log_start_offset: int
    log_end_offset: int
    log_max_timestamp: int
    def __init__(self, table_id: _Optional[int] = ..., partition_id: _Optional[int] = ..., bucket_id: _Optional[int] = ..., snapshot_id: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., log_max_timestamp: _Optional[int] = ...) -> None: ...

class NotifyLakeTableOffsetResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetServerTimeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetServerTimeResponse(_message.Message):
    __slots__ = ("server_time_ms",)
    SERVER_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    server_time_ms: int
    def __init__(self, server_time_ms: _Optional[int] = ...) -> None: ...

class OpenBarrierHoldRequest(_message.Message):
    __slots__ = ("hold_id", "timeout_ms", "start_ms")
    HOLD_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    START_MS_FIELD_NUMBER: _ClassVar[int]
    hold_id: str
    timeout_ms: int
    start_ms: int
    def __init__(self, hold_id: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., start_ms: _Optional[int] = ...) -> None: ...

class OpenBarrierHoldResponse(_message.Message):
    __slots__ = ("start_ms",)
    START_MS_FIELD_NUMBER: _ClassVar[int]
    start_ms: int
    def __init__(self, start_ms: _Optional[int] = ...) -> None: ...

class CloseBarrierHoldRequest(_message.Message):
    __slots__ = ("hold_id", "release_after_ms")
    HOLD_ID_FIELD_NUMBER: _ClassVar[int]
    RELEASE_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    hold_id: str
    release_after_ms: int
    def __init__(self, hold_id: _Optional[str] = ..., release_after_ms: _Optional[int] = ...) -> None: ...

class CloseBarrierHoldResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TieringHeartbeatRequest(_message.Message):
    __slots__ = ("job_id", "tables", "barrier")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    BARRIER_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    tables: _containers.RepeatedCompositeFieldContainer[PbTablePath]
    barrier: int
    def __init__(self, job_id: _Optional[str] = ..., tables: _Optional[_Iterable[_Union[PbTablePath, _Mapping]]] = ..., barrier: _Optional[int] = ...) -> None: ...

class TieringHeartbeatResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetTieringJobsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PbTieringJob(_message.Message):
    __slots__ = ("job_id", "tables", "last_barrier", "last_heartbeat_ms")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    LAST_BARRIER_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_MS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    tables: _containers.RepeatedCompositeFieldContainer[PbTablePath]
    last_barrier: int
    last_heartbeat_ms: int
    def __init__(self, job_id: _Optional[str] = ..., tables: _Optional[_Iterable[_Union[PbTablePath, _Mapping]]] = ..., last_barrier: _Optional[int] = ..., last_heartbeat_ms: _Optional[int] = ...) -> None: ...

class GetTieringJobsResponse(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[PbTieringJob]
    def __init__(self, jobs: _Optional[_Iterable[_Union[PbTieringJob, _Mapping]]] = ...) -> None: ...

class InitWriterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class InitWriterResponse(_message.Message):
    __slots__ = ("writer_id", "writer_token")
    WRITER_ID_FIELD_NUMBER: _ClassVar[int]
    WRITER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    writer_id: int
    writer_token: bytes
    def __init__(self, writer_id: _Optional[int] = ..., writer_token: _Optional[bytes] = ...) -> None: ...

class PbPartitionSpec(_message.Message):
    __slots__ = ("partition_key_values",)
    PARTITION_KEY_VALUES_FIELD_NUMBER: _ClassVar[int]
    partition_key_values: _containers.RepeatedCompositeFieldContainer[PbKeyValue]
    def __init__(self, partition_key_values: _Optional[_Iterable[_Union[PbKeyValue, _Mapping]]] = ...) -> None: ...

class PbPartitionInfo(_message.Message):
    __slots__ = ("partition_id", "partition_name", "lake_only")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_NAME_FIELD_NUMBER: _ClassVar[int]
    LAKE_ONLY_FIELD_NUMBER: _ClassVar[int]
    partition_id: int
    partition_name: str
    lake_only: bool
    def __init__(self, partition_id: _Optional[int] = ..., partition_name: _Optional[str] = ..., lake_only: _Optional[bool] = ...) -> None: ...

class CreatePartitionRequest(_message.Message):
    __slots__ = ("table_path", "partition_spec", "ignore_if_exists")
    TABLE_PATH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_SPEC_FIELD_NUMBER: _ClassVar[int]
    IGNORE_IF_EXISTS_FIELD_NUMBER: _ClassVar[int]
    table_path: PbTablePath
    partition_spec: PbPartitionSpec
    ignore_if_exists: bool
    def __init__(self, table_path: _Optional[_Union[PbTablePath, _Mapping]] = ..., partition_spec: _Optional[_Union[PbPartitionSpec, _Mapping]] = ..., ignore_if_exists: _Optional[bool] = ...) -> None: ...

class CreatePartitionResponse(_message.Message):
    __slots__ = ("partition_id",)
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    partition_id: int
    def __init__(self, partition_id: _Optional[int] = ...) -> None: ...

class DropPartitionRequest(_message.Message):
    __slots__ = ("table_path", "partition_spec", "ignore_if_not_exists")
    TABLE_PATH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_SPEC_FIELD_NUMBER: _ClassVar[int]
    IGNORE_IF_NOT_EXISTS_FIELD_NUMBER: _ClassVar[int]
    table_path: PbTablePath
    partition_spec: PbPartitionSpec
    ignore_if_not_exists: bool
    def __init__(self, table_path: _Optional[_Union[PbTablePath, _Mapping]] = ..., partition_spec: _Optional[_Union[PbPartitionSpec, _Mapping]] = ..., ignore_if_not_exists: _Optional[bool] = ...) -> None: ...

class DropPartitionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListPartitionInfosRequest(_message.Message):
    __slots__ = ("table_path",)
    TABLE_PATH_FIELD_NUMBER: _ClassVar[int]
    table_path: PbTablePath
    def __init__(self, table_path: _Optional[_Union[PbTablePath, _Mapping]] = ...) -> None: ...

class ListPartitionInfosResponse(_message.Message):
    __slots__ = ("partitions_info",)
    PARTITIONS_INFO_FIELD_NUMBER: _ClassVar[int]
    partitions_info: _containers.RepeatedCompositeFieldContainer[PbPartitionInfo]
    def __init__(self, partitions_info: _Optional[_Iterable[_Union[PbPartitionInfo, _Mapping]]] = ...) -> None: ...

class AdjustIsrRequest(_message.Message):
    __slots__ = ("leader_id", "table_id", "bucket_id", "leader_epoch", "isr_version", "isr")
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ISR_VERSION_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    leader_id: int
    table_id: int
    bucket_id: int
    leader_epoch: int
    isr_version: int
    isr: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, leader_id: _Optional[int] = ..., table_id: _Optional[int] = ..., bucket_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., isr_version: _Optional[int] = ..., isr: _Optional[_Iterable[int]] = ...) -> None: ...

class AdjustIsrResponse(_message.Message):
    __slots__ = ("bucket",)
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    bucket: PbBucketMetadata
    def __init__(self, bucket: _Optional[_Union[PbBucketMetadata, _Mapping]] = ...) -> None: ...

class OffsetForLeaderEpochRequest(_message.Message):
    __slots__ = ("table_id", "bucket_id", "leader_epoch")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    bucket_id: int
    leader_epoch: int
    def __init__(self, table_id: _Optional[int] = ..., bucket_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class OffsetForLeaderEpochResponse(_message.Message):
    __slots__ = ("leader_epoch", "end_offset")
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    leader_epoch: int
    end_offset: int
    def __init__(self, leader_epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...

class PbGroupBucket(_message.Message):
    __slots__ = ("partition_id", "bucket_id")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    partition_id: int
    bucket_id: int
    def __init__(self, partition_id: _Optional[int] = ..., bucket_id: _Optional[int] = ...) -> None: ...

class PbGroupOffset(_message.Message):
    __slots__ = ("partition_id", "bucket_id", "offset")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    partition_id: int
    bucket_id: int
    offset: int
    def __init__(self, partition_id: _Optional[int] = ..., bucket_id: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class GroupHeartbeatRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "member_epoch", "table_id", "session_timeout_ms", "owned", "client_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    OWNED_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    member_epoch: int
    table_id: int
    session_timeout_ms: int
    owned: _containers.RepeatedCompositeFieldContainer[PbGroupBucket]
    client_id: str
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., table_id: _Optional[int] = ..., session_timeout_ms: _Optional[int] = ..., owned: _Optional[_Iterable[_Union[PbGroupBucket, _Mapping]]] = ..., client_id: _Optional[str] = ...) -> None: ...

class GroupHeartbeatResponse(_message.Message):
    __slots__ = ("member_id", "member_epoch", "assigned", "reconciling")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_FIELD_NUMBER: _ClassVar[int]
    RECONCILING_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    member_epoch: int
    assigned: _containers.RepeatedCompositeFieldContainer[PbGroupBucket]
    reconciling: bool
    def __init__(self, member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., assigned: _Optional[_Iterable[_Union[PbGroupBucket, _Mapping]]] = ..., reconciling: _Optional[bool] = ...) -> None: ...

class CommitGroupOffsetsRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "member_epoch", "table_id", "offsets")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    member_epoch: int
    table_id: int
    offsets: _containers.RepeatedCompositeFieldContainer[PbGroupOffset]
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., table_id: _Optional[int] = ..., offsets: _Optional[_Iterable[_Union[PbGroupOffset, _Mapping]]] = ...) -> None: ...

class CommitGroupOffsetsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PbGroupSummary(_message.Message):
    __slots__ = ("group_id", "members", "lag")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    members: int
    lag: int
    def __init__(self, group_id: _Optional[str] = ..., members: _Optional[int] = ..., lag: _Optional[int] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[PbGroupSummary]
    def __init__(self, groups: _Optional[_Iterable[_Union[PbGroupSummary, _Mapping]]] = ...) -> None: ...

class DescribeGroupRequest(_message.Message):
    __slots__ = ("group_id",)
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    def __init__(self, group_id: _Optional[str] = ...) -> None: ...

class PbGroupMember(_message.Message):
    __slots__ = ("member_id", "member_epoch", "client_id", "table_id", "buckets", "table_path")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    TABLE_PATH_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    member_epoch: int
    client_id: str
    table_id: int
    buckets: _containers.RepeatedCompositeFieldContainer[PbGroupBucket]
    table_path: PbTablePath
    def __init__(self, member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., client_id: _Optional[str] = ..., table_id: _Optional[int] = ..., buckets: _Optional[_Iterable[_Union[PbGroupBucket, _Mapping]]] = ..., table_path: _Optional[_Union[PbTablePath, _Mapping]] = ...) -> None: ...

class PbGroupBucketState(_message.Message):
    __slots__ = ("table_id", "partition_id", "bucket_id", "committed", "high_watermark", "lag", "member_id", "table_path")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_ID_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_PATH_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    partition_id: int
    bucket_id: int
    committed: int
    high_watermark: int
    lag: int
    member_id: str
    table_path: PbTablePath
    def __init__(self, table_id: _Optional[int] = ..., partition_id: _Optional[int] = ..., bucket_id: _Optional[int] = ..., committed: _Optional[int] = ..., high_watermark: _Optional[int] = ..., lag: _Optional[int] = ..., member_id: _Optional[str] = ..., table_path: _Optional[_Union[PbTablePath, _Mapping]] = ...) -> None: ...

class DescribeGroupResponse(_message.Message):
    __slots__ = ("group_epoch", "members", "buckets")
    GROUP_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    group_epoch: int
    members: _containers.RepeatedCompositeFieldContainer[PbGroupMember]
    buckets: _containers.RepeatedCompositeFieldContainer[PbGroupBucketState]
    def __init__(self, group_epoch: _Optional[int] = ..., members: _Optional[_Iterable[_Union[PbGroupMember, _Mapping]]] = ..., buckets: _Optional[_Iterable[_Union[PbGroupBucketState, _Mapping]]] = ...) -> None: ...

class ListGroupOffsetsRequest(_message.Message):
    __slots__ = ("group_id", "table_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    table_id: int
    def __init__(self, group_id: _Optional[str] = ..., table_id: _Optional[int] = ...) -> None: ...

class ListGroupOffsetsResponse(_message.Message):
    __slots__ = ("offsets",)
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedCompositeFieldContainer[PbGroupOffset]
    def __init__(self, offsets: _Optional[_Iterable[_Union[PbGroupOffset, _Mapping]]] = ...) -> None: ...

class ResetGroupOffsetsRequest(_message.Message):
    __slots__ = ("group_id", "table_id", "offsets")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    table_id: int
    offsets: _containers.RepeatedCompositeFieldContainer[PbGroupOffset]
    def __init__(self, group_id: _Optional[str] = ..., table_id: _Optional[int] = ..., offsets: _Optional[_Iterable[_Union[PbGroupOffset, _Mapping]]] = ...) -> None: ...

class ResetGroupOffsetsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
