"""The public descriptions of databases, tables, partitions and buckets, and what the admin answers
with: names, descriptors, table infos, offsets specs, lake snapshots, tiering status. Shared by the
servers and the client; cluster state (placement, replicas) lives in :mod:`lakelog.cluster_state`,
where a fetch is read from in :mod:`lakelog.fetch_info`."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from enum import IntEnum
from typing import ClassVar, Mapping, Sequence, Union

import pyarrow as pa

from lakelog.errors import InvalidNameError, InvalidPartitionError, InvalidTableError
from lakelog.record.meta_columns import RESERVED_COLUMNS

NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,127}")
DATALAKE_ENABLED = "table.datalake.enabled"
DATALAKE_FORMAT = "table.datalake.format"
MAX_BUCKETS = 1024
PARTITION_NAME_SEPARATOR = "$"
_PARTITION_VALUE_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,200}")


def validate_name(kind: str, name: str) -> str:
    """Refuse a name before it can reach a file path."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidNameError(
            f"invalid {kind} name {name!r}: names match [A-Za-z0-9_][A-Za-z0-9_-]{{0,127}}"
        )
    return name


@dataclass(frozen=True, order=True, slots=True)
class TablePath:
    database: str
    table: str

    def __post_init__(self) -> None:
        validate_name("database", self.database)
        validate_name("table", self.table)

    @classmethod
    def parse(cls, text: str) -> "TablePath":
        """Parse ``database.table``, the form the CLI and the tiering job take."""
        database, sep, table = text.partition(".")
        if not sep:
            raise InvalidNameError(f"invalid table path {text!r}: expected DATABASE.TABLE")
        return cls(database, table)

    def __str__(self) -> str:
        return f"{self.database}.{self.table}"


def bucket_key_type_ok(data_type: pa.DataType) -> bool:
    """Types whose values have one canonical encoding for the bucket hash (floats do not: 0.0 and
    -0.0, NaNs); see lakelog.client.bucket_assigner."""
    return (
        pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_binary(data_type)
        or pa.types.is_large_binary(data_type)
        or pa.types.is_boolean(data_type)
        or pa.types.is_integer(data_type)
        or pa.types.is_temporal(data_type)
    )


def _key_columns(kind: str, keys: Sequence[str], schema: pa.Schema) -> None:
    if isinstance(keys, str) or not all(isinstance(key, str) for key in keys):
        raise InvalidTableError(f"{kind} must be a list of column names, got {keys!r}")
    if len(set(keys)) != len(keys):
        raise InvalidTableError(f"{kind} {list(keys)} name a column twice")
    for key in keys:
        if key not in schema.names:
            raise InvalidTableError(f"{kind}: {key!r} is not a column of the schema {schema.names}")


@dataclass(frozen=True)
class TableDescriptor:
    """A table to create. ``bucket_keys``: rows with equal values of these columns go to one bucket.
    ``partition_keys``: string columns whose values name the partition a row belongs to."""

    schema: pa.Schema
    buckets: int = 1
    properties: Mapping[str, str] = field(default_factory=dict)
    comment: str = ""
    bucket_keys: Sequence[str] = ()
    partition_keys: Sequence[str] = ()

    def validate(self) -> None:
        if not isinstance(self.schema, pa.Schema) or len(self.schema) == 0:
            raise InvalidTableError("a table needs an Arrow schema with at least one column")
        names = self.schema.names
        if len(set(names)) != len(names):
            raise InvalidTableError(f"duplicate column names in schema: {names}")
        for name in names:
            if name in RESERVED_COLUMNS:
                raise InvalidTableError(f"column name {name!r} is reserved for lakelog's own columns")
        if not isinstance(self.buckets, int) or not 1 <= self.buckets <= MAX_BUCKETS:
            raise InvalidTableError(f"buckets must be between 1 and {MAX_BUCKETS}, got {self.buckets!r}")
        for key, value in self.properties.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise InvalidTableError(f"table property {key!r}={value!r}: keys and values must be strings")
        _key_columns("bucket_keys", self.bucket_keys, self.schema)
        _key_columns("partition_keys", self.partition_keys, self.schema)
        for key in self.bucket_keys:
            if not bucket_key_type_ok(self.schema.field(key).type):
                raise InvalidTableError(f"bucket key {key!r} has type {self.schema.field(key).type}, which has no stable hash")
            if key in self.partition_keys:
                raise InvalidTableError(f"{key!r} is a partition key; a bucket key cannot be one (it is constant in a partition)")
        for key in self.partition_keys:
            if not pa.types.is_string(self.schema.field(key).type):
                raise InvalidTableError(f"partition key {key!r} has type {self.schema.field(key).type}; partition keys are string columns")

    @property
    def lake_enabled(self) -> bool:
        return self.properties.get(DATALAKE_ENABLED, "false").lower() == "true"


@dataclass(frozen=True)
class TableInfo:
    """A table as the coordinator knows it."""

    table_id: int
    path: TablePath
    schema: pa.Schema
    schema_id: int
    buckets: int
    properties: Mapping[str, str]
    comment: str = ""
    created_ms: int = 0
    bucket_keys: tuple[str, ...] = ()
    partition_keys: tuple[str, ...] = ()
    # Set on the info of one partition of a partitioned table: its buckets are a log set of their own.
    partition_id: int | None = None
    partition_name: str = ""

    @property
    def lake_enabled(self) -> bool:
        return self.properties.get(DATALAKE_ENABLED, "false").lower() == "true"

    @property
    def partitioned(self) -> bool:
        return bool(self.partition_keys)

    @property
    def physical_id(self) -> int:
        """What tablet servers and clients key a set of bucket logs by: the partition's id for a
        partition, else the table's. Table and partition ids come from one sequence, so they never clash."""
        return self.table_id if self.partition_id is None else self.partition_id

    @property
    def label(self) -> str:
        """``db.table`` or ``db.table partition NAME``, for messages."""
        return str(self.path) if self.partition_id is None else f"{self.path} partition {self.partition_name}"

    def for_partition(self, partition: PartitionInfo) -> "TableInfo":
        return dataclasses.replace(self, partition_id=partition.partition_id, partition_name=partition.partition_name)

    @property
    def descriptor(self) -> TableDescriptor:
        return TableDescriptor(
            self.schema, self.buckets, dict(self.properties), self.comment, self.bucket_keys, self.partition_keys
        )


def validate_partition_value(key: str, value: object) -> str:
    """A partition key's value names directories and object keys: only letters, digits, ``_``,
    ``-`` and ``.``, 1 to 200 of them, never ``..`` (and never the name separator ``$``)."""
    if not isinstance(value, str):
        raise InvalidPartitionError(f"partition key {key!r}: value {value!r} is a {type(value).__name__}, not a string")
    if not _PARTITION_VALUE_PATTERN.fullmatch(value) or ".." in value or value == ".":
        raise InvalidPartitionError(
            f"partition key {key!r}: value {value!r} is not a safe partition name"
            " (1 to 200 of A-Z a-z 0-9 _ - ., never '..' or '/')"
        )
    return value


def partition_name(partition_keys: Sequence[str], spec: Mapping[str, object]) -> str:
    """The name of the partition ``spec`` (key -> value) names: its values in key order, joined by ``$``."""
    if not isinstance(spec, Mapping):
        raise InvalidPartitionError(f"a partition spec is a dict of partition key to value, not {spec!r}")
    if not partition_keys:
        raise InvalidPartitionError("the table is not partitioned")
    keys = [key for key in spec]
    if sorted(map(str, keys)) != sorted(partition_keys):
        raise InvalidPartitionError(f"partition spec {dict(spec)!r} must give exactly the partition keys {list(partition_keys)}")
    return PARTITION_NAME_SEPARATOR.join(validate_partition_value(key, spec[key]) for key in partition_keys)


def partition_spec(partition_keys: Sequence[str], name: str) -> dict[str, str]:
    """The inverse of :func:`partition_name`, checked the same way."""
    values = name.split(PARTITION_NAME_SEPARATOR) if isinstance(name, str) else [name]
    if len(values) != len(partition_keys):
        raise InvalidPartitionError(f"partition name {name!r} does not have one value for each partition key {list(partition_keys)}")
    spec = dict(zip(partition_keys, values))
    partition_name(partition_keys, spec)
    return spec


@dataclass(frozen=True)
class TableChange:
    """One change of ``admin.alter_table``: a nullable column added last, or a column widened (see
    :mod:`lakelog.schema_evolution` for what is allowed and why)."""

    ADD_COLUMN: ClassVar[str] = "add_column"
    WIDEN_COLUMN: ClassVar[str] = "widen_column"

    kind: str
    name: str
    type: pa.DataType
    comment: str = ""

    @classmethod
    def add_column(cls, name: str, arrow_type: pa.DataType, comment: str = "") -> "TableChange":
        return cls(cls.ADD_COLUMN, name, arrow_type, comment)

    @classmethod
    def widen_column(cls, name: str, arrow_type: pa.DataType) -> "TableChange":
        return cls(cls.WIDEN_COLUMN, name, arrow_type)


@dataclass(frozen=True)
class SchemaInfo:
    """One version of a table's schema: ids count from 1, one more per alter."""

    schema_id: int
    schema: pa.Schema


@dataclass(frozen=True, order=True, slots=True)
class PartitionInfo:
    """A partition of a partitioned table: its coordinator-assigned id (never reused) and name.
    ``lake_only``: dropped from the log of a lake-enabled table once the lake held all of it; its
    records are read from the lake, nothing can be written to it and its name is not reused."""

    partition_id: int
    partition_name: str
    lake_only: bool = False


@dataclass(frozen=True, slots=True)
class BucketInfo:
    """Where a bucket's records live now; -1 where a tier is empty. With ``leader_available``
    false the leader is down or unreachable, and the offsets are unknown (-1)."""

    leader: int
    high_watermark: int
    local_log_start_offset: int
    remote_log_start_offset: int = -1
    remote_log_end_offset: int = -1
    lake_log_start_offset: int = -1
    lake_log_end_offset: int = -1
    leader_available: bool = True
    remote_error: str = ""  # why the remote tier cannot be trusted now (objects vanished, ...), empty if it can
    replicas: tuple[int, ...] = ()  # the servers holding a copy, the preferred leader first
    isr: tuple[int, ...] = ()  # the replicas in sync with the leader: a record is acknowledged once all hold it
    leader_epoch: int = 0

    @classmethod
    def unavailable(cls, leader: int) -> "BucketInfo":
        return cls(leader, -1, -1, leader_available=False)


@dataclass(frozen=True, slots=True)
class LakeBucketOffset:
    """What a lake snapshot holds of one bucket: offsets ``[log_start_offset, log_end_offset)`` and
    the largest commit timestamp among them (-1 when unknown)."""

    log_start_offset: int
    log_end_offset: int
    log_max_timestamp: int = -1


# How a lake snapshot keys a bucket: its number in a table without partitions, else
# ``(partition_id, bucket)`` (docs/contract.md, "Partitioned tables and bucket keys").
LakeBucketKey = Union[int, tuple[int, int]]


def lake_bucket_key(partition_id: int | None, bucket: int) -> LakeBucketKey:
    return bucket if partition_id is None else (partition_id, bucket)


def split_lake_bucket_key(key: LakeBucketKey) -> tuple[int | None, int]:
    """``(partition_id or None, bucket)`` of a :data:`LakeBucketKey`."""
    return (None, key) if isinstance(key, int) else (key[0], key[1])


def lake_bucket_order(key: LakeBucketKey) -> tuple[int, int]:
    """Sort key of :data:`LakeBucketKey`: by partition id, then bucket."""
    partition_id, bucket = split_lake_bucket_key(key)
    return (partition_id or 0, bucket)


@dataclass(frozen=True)
class LakeSnapshot:
    """A committed lake (Iceberg) snapshot and, per bucket (:data:`LakeBucketKey`), the log range it holds."""

    snapshot_id: int
    bucket_offsets: Mapping[LakeBucketKey, LakeBucketOffset] = field(default_factory=dict)


@dataclass(frozen=True)
class TieringJobInfo:
    """A tiering job as the coordinator last heard of it (docs/contract.md, "Tiering, consistent cuts and cursors", freshness and lineage)."""

    job_id: str
    tables: tuple[TablePath, ...]
    last_barrier: int
    last_heartbeat_ms: int


@dataclass(frozen=True)
class TableTieringStatus:
    """How fresh a table's lake is: ``lag_ms`` is now minus ``lake_max_timestamp`` (-1 while the
    lake is empty) and ``offsets_behind`` the high watermarks minus the lake ends, over buckets."""

    path: TablePath
    job_id: str
    last_barrier: int
    lake_max_timestamp: int
    lag_ms: int
    offsets_behind: int


class OffsetType(IntEnum):
    EARLIEST = 0
    LATEST = 1
    TIMESTAMP = 2


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Which offset ``list_offsets`` resolves; build one with the class methods."""

    type: OffsetType
    ms: int = -1

    @classmethod
    def earliest(cls) -> "OffsetSpec":
        return cls(OffsetType.EARLIEST)

    @classmethod
    def latest(cls) -> "OffsetSpec":
        return cls(OffsetType.LATEST)

    @classmethod
    def timestamp(cls, ms: int) -> "OffsetSpec":
        """The first offset whose commit timestamp is >= ``ms``."""
        return cls(OffsetType.TIMESTAMP, int(ms))
