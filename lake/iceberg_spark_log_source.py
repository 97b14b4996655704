"""The ``iceberg`` LogSource: lake data files are read by Spark tasks.

PyIceberg plans on the client; a whole planned range is then read in one Spark job, one partition
per data file (``mapInArrow`` over ``range(n)`` split n ways; each task opens its file through
PyIceberg's FileIO and skips the row groups outside its offsets). ``toLocalIterator`` streams the
result back in partition order, which is offset order, so the client holds a few batches, never the
range. Batches travel as Arrow IPC streams in a binary column, so every Arrow type comes back
exactly as the log has it. Only DataFrame APIs are used, so a Spark Connect (``sc://``) session
works as well as a local or cluster one; no Iceberg Spark runtime is needed.

Through Spark Connect the whole range is one job and the client runs no JVM; on a classic
(in-process) session Spark's ``toLocalIterator`` runs a job per partition, i.e. per data file.

The session is the one of ``lake.spark.master`` (the client's, or the one the cluster advertises),
else the active one, else ``local[*]``; it is shared with everything else in the process and never
stopped here. Through Spark Connect it is the session all lakelog clients of that server share
(:func:`~lakelog.spark_session.shared_connect_session`), so a new client finds warm Python workers.
"""

from __future__ import annotations

import functools
import itertools
import threading
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa
from pyiceberg.table import Table
from pyspark.sql import DataFrame, SparkSession

from lakelog.config import Configuration
from lakelog.lake.iceberg_file_reader import FileRange
from lakelog.lake.iceberg_log_source import IcebergLogSource
from lakelog.lake.spark_file_task import IPC_COLUMN, LakeRead, read_files_in_task
from lakelog.lake.lake_catalog import LakeCatalog, lake_call
from lakelog.lake_config import LakeConfig
from lakelog.metadata import TableInfo
from lakelog.spark_session import refuse_local_lake, shared_connect_session, spark_session

APP_NAME = "lakelog-lake-reader"
_END = object()


def _each(what: str, rows: Iterator[Any]) -> Iterator[Any]:
    """``rows`` with every failure of Spark's (raised while iterating) as a LakeError."""
    while (row := lake_call(what, lambda: next(rows, _END))) is not _END:
        yield row


def _first_fetched(frame: DataFrame) -> Iterator[Any]:
    """``frame``'s rows through ``toLocalIterator``, its job started: failures to run it at all are
    raised here, not on the first ``next``."""
    rows = frame.toLocalIterator()
    first = next(rows, _END)
    return rows if first is _END else itertools.chain([first], rows)


class IcebergSparkLogSource(IcebergLogSource):
    def __init__(
        self,
        table_info: TableInfo,
        lake_config: LakeConfig,
        client_config: Configuration,
        catalog: Callable[[], LakeCatalog] | None = None,
    ) -> None:
        super().__init__(table_info, lake_config, client_config, catalog)
        self._master = lake_config.spark_master_for(client_config)
        self._spark: SparkSession | None = None
        self._spark_lock = threading.Lock()

    def read_files(self, table: Table, files: Sequence[FileRange], log_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        if not files:
            return
        read = LakeRead(dict(table.io.properties), tuple(files), log_schema, self.batch_rows)
        task = functools.partial(read_files_in_task, read)
        what = f"Spark could not read {len(files)} lake data file(s) from {files[0].path}"
        rows = lake_call(what, lambda: self._started(task, len(files)))
        for row in _each(what, rows):
            with pa.ipc.open_stream(pa.py_buffer(row[0])) as reader:
                yield from reader

    def _started(self, task: Callable[..., Iterator[pa.RecordBatch]], partitions: int) -> Iterator[Any]:
        return _first_fetched(self._session().range(0, partitions, 1, partitions).mapInArrow(task, f"{IPC_COLUMN} binary"))

    def _session(self) -> SparkSession:
        with self._spark_lock:
            if self._spark is None:
                if self._master.startswith("sc://"):
                    spark = shared_connect_session(self._master)
                else:
                    active = None if self._master else SparkSession.getActiveSession()
                    spark = active or spark_session(self._master or None, APP_NAME)
                refuse_local_lake(spark, self._lake_config)
                self._spark = spark
            return self._spark
