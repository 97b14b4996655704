"""The ``iceberg-arrow`` LogSource: reads lake data files in this process with pyarrow, through
the lake table's own PyIceberg FileIO (local paths, s3://, whatever the catalog configures).
No Spark: the light choice for a client that reads little from the lake."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyiceberg.table import Table

from lakelog.lake.iceberg_log_source import IcebergLogSource
from lakelog.lake.iceberg_file_reader import read_lake_file


class IcebergArrowLogSource(IcebergLogSource):
    def read_file(self, table: Table, path: str, log_schema: pa.Schema, start: int, end: int) -> Iterator[pa.RecordBatch]:
        return read_lake_file(table.io, path, log_schema, start, end, self.batch_rows)
