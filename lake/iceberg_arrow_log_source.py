"""The ``iceberg-arrow`` LogSource: reads lake data files in this process with pyarrow, through
the lake table's own PyIceberg FileIO (local paths, s3://, whatever the catalog configures).
No Spark: the light choice for a client that reads little from the lake."""

from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
from pyiceberg.table import Table

from lakelog.lake.iceberg_file_reader import FileRange, read_lake_file
from lakelog.lake.iceberg_log_source import IcebergLogSource


class IcebergArrowLogSource(IcebergLogSource):
    def read_files(self, table: Table, files: Sequence[FileRange], log_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        for file in files:
            yield from read_lake_file(table.io, file.path, log_schema, file.start, file.end, self.batch_rows)
