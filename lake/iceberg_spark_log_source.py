"""The ``iceberg`` LogSource: lake data files are read by Spark tasks.

PyIceberg plans on the client; a whole planned range is then read in one Spark job, one partition
per data file but the first, which is split by row groups so the first records come soon
(``mapInArrow`` over ``range(n)`` split n ways; each task opens its file through PyIceberg's FileIO
and fetches its row groups' wanted column chunks, see :mod:`~lakelog.lake.spark_file_task`).
``toLocalIterator`` streams them back in partition order, which is offset order, and the client
decodes each row group as it arrives (:mod:`~lakelog.lake.fetched_row_groups`), so it holds a few
row groups, never the range. Only DataFrame APIs are used, so a Spark Connect (``sc://``) session
works as well as a local or cluster one; no Iceberg Spark runtime is needed.

Through Spark Connect the whole range is one job and the client runs no JVM; on a classic
(in-process) session Spark's ``toLocalIterator`` runs a job per partition.

The session is the one of ``lake.spark.master`` (the client's, or the one the cluster advertises),
else the active one, else ``local[*]``; it is shared with everything else in the process and never
stopped here. Through Spark Connect it is the session all lakelog clients of that server share
(:func:`~lakelog.spark_runtime.spark_session.shared_connect_session`), so a new client finds warm Python workers.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import uuid
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa
from pyiceberg.table import Table
from pyspark.sql import DataFrame, SparkSession

from lakelog.config import Configuration
from lakelog.lake.iceberg_file_reader import FileRange
from lakelog.lake.iceberg_log_source import IcebergLogSource
from lakelog.lake.fetched_row_groups import decode_fetched
from lakelog.lake.spark_file_task import PIECE_DDL, LakeRead, fetch_parts_in_task, plan_parts
from lakelog.lake.lake_catalog import LakeCatalog, lake_call
from lakelog.lake_config import LakeConfig
from lakelog.metadata import TableInfo
from lakelog.spark_runtime.spark_session import refuse_local_lake, shared_connect_session, spark_session

logger = logging.getLogger(__name__)

APP_NAME = "lakelog-lake-reader"
# Rows per Spark partition of a read's first file after its first partition, one row group (see plan_parts).
PART_ROWS = 1 << 19
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


def _interrupt(spark: SparkSession, tag: str) -> None:
    try:
        stopped = spark.interruptTag(tag)
    except Exception as error:  # noqa: BLE001 - a session gone or unreachable has no job left to stop
        logger.warning("could not stop the Spark jobs of a lake read closed early: %s", error)
        return
    if stopped:
        logger.info("stopped %d Spark operation(s) of a lake read closed early", len(stopped))


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
        parts = plan_parts(table.io, files, PART_ROWS)
        read = LakeRead(dict(table.io.properties), tuple(parts), tuple(log_schema.names))
        task = functools.partial(fetch_parts_in_task, read)
        what = f"Spark could not read {len(files)} lake data file(s) from {files[0].path}"
        spark = lake_call(what, self._session)
        # The read's jobs carry a tag of their own (tags are per thread and session), so a reader
        # closed before the end stops them instead of leaving Spark reading for no one.
        tag = f"lakelog-lake-read-{uuid.uuid4().hex}"
        spark.addTag(tag)
        read_all = False
        try:
            rows = lake_call(what, lambda: _first_fetched(spark.range(0, len(parts), 1, len(parts)).mapInArrow(task, PIECE_DDL)))
            yield from decode_fetched(_each(what, rows), parts, log_schema, self.batch_rows, self.read_threads)
            read_all = True
        finally:
            spark.removeTag(tag)
            if not read_all:
                _interrupt(spark, tag)

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
