"""The ``iceberg-arrow`` LogSource: reads lake data files in this process with pyarrow, through
the lake table's own PyIceberg FileIO (local paths, s3://, whatever the catalog configures), row
groups in parallel (``client.lake.read-threads``), the batches of small files combined
(:mod:`lakelog.lake.small_batches`). No Spark: the light choice for a client that
reads little from the lake, and the quick one for a client on the same machine as its data."""

from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
from pyiceberg.table import Table

from lakelog.lake.iceberg_file_reader import FileRange, read_lake_files
from lakelog.lake.iceberg_log_source import IcebergLogSource
from lakelog.lake.small_batches import combine_small_batches


class IcebergArrowLogSource(IcebergLogSource):
    def read_files(self, table: Table, files: Sequence[FileRange], log_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        return combine_small_batches(read_lake_files(table.io, files, log_schema, self.batch_rows, self.read_threads), self.batch_rows)
