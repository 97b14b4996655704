"""lakelog: a log store whose client reads a table's whole history, wherever it lives.

The public client API is re-exported here: ``lakelog.connect``, ``lakelog.TablePath`` and friends.
"""

from lakelog.client.admin import Admin
from lakelog.client.connection import Connection, connect
from lakelog.client.scanner.log_scanner import LogScanner
from lakelog.client.scanner.scan_records import ScanRecord, ScanRecords
from lakelog.client.table import Table
from lakelog.client.writer import AppendWriter
from lakelog.errors import (
    CorruptRecordError,
    DatabaseAlreadyExistError,
    DatabaseNotExistError,
    InvalidNameError,
    InvalidRequestError,
    InvalidTableError,
    InvalidTimestampError,
    LakelogError,
    NetworkError,
    OffsetOutOfRangeError,
    SchemaMismatchError,
    TableAlreadyExistError,
    TableNotExistError,
    UnknownBucketError,
)
from lakelog.metadata import BucketInfo, OffsetSpec, TableDescriptor, TableInfo, TablePath

__all__ = [
    "Admin",
    "AppendWriter",
    "BucketInfo",
    "Connection",
    "CorruptRecordError",
    "DatabaseAlreadyExistError",
    "DatabaseNotExistError",
    "InvalidNameError",
    "InvalidRequestError",
    "InvalidTableError",
    "InvalidTimestampError",
    "LakelogError",
    "LogScanner",
    "NetworkError",
    "OffsetOutOfRangeError",
    "OffsetSpec",
    "ScanRecord",
    "ScanRecords",
    "SchemaMismatchError",
    "Table",
    "TableAlreadyExistError",
    "TableDescriptor",
    "TableInfo",
    "TablePath",
    "UnknownBucketError",
    "connect",
]
