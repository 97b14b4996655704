"""What both Iceberg LogSources share: the lake table at a snapshot, planning, timestamp lookups.

They differ only in where the planned data files of a read are read
(:meth:`IcebergLogSource.read_files`): one after the other in this process, or in one Spark job. The catalog is the connection's (shared by every LogSource and
the admin of one connection) and opens on first use, so creating a LogSource (every scanner of a
lake-enabled table does) costs nothing until the lake is actually read. Each lake snapshot is
planned once (:class:`~lakelog.lake.iceberg_scan_planner.SnapshotFiles`).
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from typing import Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.table import Table

from lakelog.config import Configuration
from lakelog.errors import InvalidTimestampError, LakeError
from lakelog.lake.lake_catalog import LakeCatalog
from lakelog.lake_config import LakeConfig
from lakelog.lake.iceberg_file_reader import FileRange
from lakelog.lake.iceberg_scan_planner import SnapshotFiles
from lakelog.metadata import TableInfo

from lakelog.log_source import FetchContext, LogSource, LookupContext
from lakelog.record.meta_columns import OFFSET_COLUMN, TIMESTAMP_COLUMN, with_meta_fields


class IcebergLogSource(LogSource):
    def __init__(
        self,
        table_info: TableInfo,
        lake_config: LakeConfig,
        client_config: Configuration,
        catalog: Callable[[], LakeCatalog] | None = None,
    ) -> None:
        """``catalog`` returns the connection's lake catalog (opening it the first time); without
        one, this LogSource opens a catalog of its own from ``lake_config`` on first use."""
        self.table_info = table_info
        self.batch_rows: int = client_config.get("client.lake.batch-rows")
        self.read_threads: int = client_config.get("client.lake.read-threads")
        self._lake_config = lake_config
        self._catalog_of_connection = catalog
        self._own_catalog: LakeCatalog | None = None
        self._files = SnapshotFiles()
        self._table: Table | None = None
        self._lock = threading.Lock()

    @abstractmethod
    def read_files(self, table: Table, files: Sequence[FileRange], log_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        """The rows of ``files`` (each within its offset range), file after file, as batches of
        ``log_schema`` (see :func:`lakelog.lake.iceberg_file_reader.read_lake_file`)."""

    def fetch_log_records(self, context: FetchContext) -> Iterator[pa.RecordBatch]:
        schema = self.table_info.schema
        fields = [schema.field(i) for i in context.projection] if context.projection else list(schema)
        log_schema = with_meta_fields(pa.schema(fields))
        table = self.table_at(context.lake_snapshot_id)
        start, end = context.fetch_start_offset, context.log_end_offset_of_snapshot
        files = self._files.bucket_files(table, context.lake_snapshot_id, context.bucket, start, end, partition_name=context.partition_name)
        ranges = [FileRange(file.path, max(start, file.first_offset), min(end, file.last_offset + 1), file.size_bytes) for file in files]
        yield from self.read_files(table, ranges, log_schema)

    def lookup_log_offset_by_timestamp(self, context: LookupContext) -> int:
        """Files hold offsets in order and timestamps never decrease with offsets, so the answer is
        in the first file (by offset) whose largest timestamp reaches ``context.timestamp``: only
        that one is read."""
        table = self.table_at(context.lake_snapshot_id)
        meta_only = with_meta_fields(pa.schema([]))
        files = self._files.bucket_files(
            table, context.lake_snapshot_id, context.bucket, min_timestamp_ms=context.timestamp, partition_name=context.partition_name
        )
        for file in files[:1]:
            for batch in self.read_files(table, [FileRange(file.path, file.first_offset, file.last_offset + 1)], meta_only):
                index = pc.index(pc.greater_equal(batch.column(TIMESTAMP_COLUMN), context.timestamp), True).as_py()
                if index >= 0:
                    return int(batch.column(OFFSET_COLUMN)[index].as_py())
        raise InvalidTimestampError(
            f"{self.table_info.path}{f' partition {context.partition_name}' if context.partition_name else ''} bucket {context.bucket}:"
            f" timestamp {context.timestamp} is past the largest one"
            f" in lake snapshot {context.lake_snapshot_id}"
        )

    def table_at(self, snapshot_id: int) -> Table:
        """The lake table, reloaded when it does not know ``snapshot_id`` yet (tiered after it was loaded)."""
        with self._lock:
            table = self._table
            if table is None or table.snapshot_by_id(snapshot_id) is None:
                table = self._table = self._catalog().load_table(self.table_info.path)
        if table.snapshot_by_id(snapshot_id) is None:
            raise LakeError(
                f"{self.table_info.path}: lake snapshot {snapshot_id} is not in lake table {'.'.join(table.name())} (expired?)"
            )
        return table

    def _catalog(self) -> LakeCatalog:
        if self._catalog_of_connection is not None:
            return self._catalog_of_connection()
        if self._own_catalog is None:
            self._own_catalog = LakeCatalog(self._lake_config)
        return self._own_catalog
