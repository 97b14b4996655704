"""The ``iceberg`` LogSource (the default): lake data files are read by Spark tasks.

PyIceberg plans on the client; each planned file is then read in chunks of ``client.lake.batch-rows``
offsets, one Spark job each (``mapInArrow`` over a one-row DataFrame, whose task opens the file
through PyIceberg's FileIO and skips the row groups outside its chunk), and ``toArrow()`` brings the
chunk back, so neither the driver nor the client ever holds more than one chunk of a file, however
big. Only DataFrame APIs are used, so a Spark Connect (``sc://``)
session works as well as a local or cluster one; no Iceberg Spark runtime is needed. Batches travel
as Arrow IPC streams in a binary column, so every Arrow type comes back exactly as the log has it.

The session is the active one, else one started from ``lake.spark.master`` on first read; it is
shared with everything else in the process and never stopped here.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

import pyarrow as pa
from pyiceberg.io import load_file_io
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from lakelog.config import Configuration
from lakelog.lake.iceberg_log_source import IcebergLogSource
from lakelog.lake.lake_catalog import LakeCatalog, lake_call
from lakelog.lake_config import LakeConfig
from lakelog.lake.iceberg_file_reader import read_lake_file
from lakelog.metadata import TableInfo
from lakelog.spark_session import spark_session

APP_NAME = "lakelog-lake-reader"
IPC_COLUMN = "ipc"


@dataclass(frozen=True)
class FileRead:
    """What a Spark task needs to read one file (pickled with the task)."""

    io_properties: Mapping[str, str]
    path: str
    log_schema: pa.Schema
    start: int
    end: int
    batch_rows: int


def read_file_in_task(read: FileRead, chunks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A ``mapInArrow`` function over chunk numbers: each batch of a chunk's offsets becomes one row
    holding its IPC stream."""
    io = load_file_io(dict(read.io_properties), read.path)
    size = read.batch_rows
    for numbers in chunks:
        for chunk in numbers.column(0).to_pylist():
            start = read.start + chunk * size
            for batch in read_lake_file(io, read.path, read.log_schema, start, min(start + size, read.end), read.batch_rows):
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, batch.schema) as writer:
                    writer.write_batch(batch)
                yield pa.record_batch([pa.array([sink.getvalue().to_pybytes()], pa.binary())], names=[IPC_COLUMN])


class IcebergSparkLogSource(IcebergLogSource):
    def __init__(
        self,
        table_info: TableInfo,
        lake_config: LakeConfig,
        client_config: Configuration,
        catalog: Callable[[], LakeCatalog] | None = None,
    ) -> None:
        super().__init__(table_info, lake_config, client_config, catalog)
        self._master: str = client_config.get("lake.spark.master")
        self._spark: SparkSession | None = None
        self._spark_lock = threading.Lock()

    def read_file(self, table: Table, path: str, log_schema: pa.Schema, start: int, end: int) -> Iterator[pa.RecordBatch]:
        read = FileRead(dict(table.io.properties), path, log_schema, start, end, self.batch_rows)
        task = functools.partial(read_file_in_task, read)
        # One small job per chunk, each finished before the next starts: a driver holds one chunk.
        for chunk in range(-(-(end - start) // read.batch_rows)):
            blobs = lake_call(
                f"Spark could not read lake data file {path}",
                lambda: self._session().range(chunk, chunk + 1, 1, 1).mapInArrow(task, f"{IPC_COLUMN} binary").toArrow(),
            )
            for blob in blobs.column(IPC_COLUMN).combine_chunks():
                with pa.ipc.open_stream(blob.as_buffer()) as reader:
                    yield from reader

    def _session(self) -> SparkSession:
        with self._spark_lock:
            if self._spark is None:
                self._spark = SparkSession.getActiveSession() or spark_session(self._master, APP_NAME)
            return self._spark
