"""lakelog: a log store whose client reads a table's whole history, wherever it lives.

The public client API is re-exported here: ``lakelog.connect``, ``lakelog.TablePath`` and friends.
"""

import os

# Set before gRPC loads. PySpark (the tiering job, the lake LogSource) starts its JVM with
# fork() + preexec_fn; gRPC's fork handlers would restart gRPC's threads inside that child, which
# can kill it before it execs the JVM. lakelog never uses a gRPC channel across a fork.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
# gRPC's C core writes its own lines to stderr, outside Python's logging; lakelog reports every
# failure itself (as a LakelogError, or a log line naming the server), so only gRPC's errors remain.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from lakelog.client.admin import Admin  # noqa: E402 - after the gRPC setting above
from lakelog.client.barrier_hold import BarrierHold
from lakelog.client.connection import Connection, connect
from lakelog.log_source import FetchContext, LakeStorage, LogSource, LookupContext
from lakelog.client.scanner.log_scanner import LogScanner
from lakelog.client.scanner.scan_records import ScanRecord, ScanRecords
from lakelog.client.table import Table
from lakelog.client.record_accumulator import AppendAck
from lakelog.client.writer import AppendWriter
from lakelog.errors import (
    AuthenticationError,
    AuthorizationError,
    BarrierHoldError,
    CorruptRecordError,
    DatabaseAlreadyExistError,
    DatabaseNotExistError,
    DeliveryTimeoutError,
    FencedMemberError,
    GroupNotEmptyError,
    InvalidNameError,
    InvalidPartitionError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidAlterTableError,
    InvalidTableError,
    InvalidTimestampError,
    LakeDataError,
    LakeError,
    LakelogError,
    LakeSnapshotNotExistError,
    NetworkError,
    NotEnoughReplicasError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    PartitionAlreadyExistsError,
    PartitionNotExistError,
    RecordFormatError,
    SchemaMismatchError,
    ServerUnreachableError,
    StaleLakeSnapshotError,
    TableAlreadyExistError,
    TableNotExistError,
    TlsError,
    TooManyBucketsError,
    TooManyPartitionsError,
    UnknownBucketError,
    UnknownMemberError,
)
from lakelog.metadata import (
    BucketInfo,
    LakeBucketOffset,
    LakeSnapshot,
    OffsetSpec,
    SchemaInfo,
    TableChange,
    TableDescriptor,
    TableInfo,
    TablePath,
    TableTieringStatus,
    TieringJobInfo,
)
from lakelog.metadata import PartitionInfo
from lakelog.version import __version__

__all__ = [
    "Admin",
    "AppendAck",
    "AppendWriter",
    "AuthenticationError",
    "AuthorizationError",
    "BarrierHold",
    "BarrierHoldError",
    "BucketInfo",
    "Connection",
    "CorruptRecordError",
    "DatabaseAlreadyExistError",
    "DatabaseNotExistError",
    "DeliveryTimeoutError",
    "FencedMemberError",
    "FetchContext",
    "GroupNotEmptyError",
    "InvalidNameError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidAlterTableError",
    "InvalidTableError",
    "InvalidTimestampError",
    "LakeBucketOffset",
    "LakeDataError",
    "LakeError",
    "LakelogError",
    "LakeSnapshot",
    "LakeSnapshotNotExistError",
    "LakeStorage",
    "LogScanner",
    "LogSource",
    "LookupContext",
    "NetworkError",
    "NotEnoughReplicasError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "RecordFormatError",
    "OffsetSpec",
    "ScanRecord",
    "ScanRecords",
    "SchemaMismatchError",
    "ServerUnreachableError",
    "StaleLakeSnapshotError",
    "Table",
    "TableAlreadyExistError",
    "TableNotExistError",
    "SchemaInfo",
    "TableChange",
    "TableDescriptor",
    "TableInfo",
    "TablePath",
    "TableTieringStatus",
    "TieringJobInfo",
    "TlsError",
    "UnknownBucketError",
    "UnknownMemberError",
    "InvalidPartitionError",
    "PartitionAlreadyExistsError",
    "PartitionInfo",
    "PartitionNotExistError",
    "TooManyPartitionsError",
    "TooManyBucketsError",
    "__version__",
    "connect",
]

from lakelog import aio  # noqa: E402 - after the sync client it is built on; `lakelog.aio.connect(...)`
