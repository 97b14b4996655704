"""Reading one data file of a lake table, batch by batch, as log rows.

Both Iceberg LogSources read files here: in-process (``iceberg-arrow``) or inside a Spark task
(``iceberg``). Only the wanted columns are read, row groups wholly outside the offset range are
skipped by their Parquet statistics, and nothing beyond one row group is held at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO

from lakelog.errors import LakeDataError, LakeError
from lakelog.lake.log_rows import to_log_rows
from lakelog.record.meta_columns import OFFSET_COLUMN


@dataclass(frozen=True, slots=True)
class FileRange:
    """Offsets ``[start, end)`` of the data file at ``path``."""

    path: str
    start: int
    end: int


def read_lake_file(
    io: FileIO, path: str, log_schema: pa.Schema, start: int, end: int, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """The rows of ``path`` with offsets in ``[start, end)``, in file order, as batches of
    ``log_schema`` (see :func:`lakelog.lake.log_rows.to_log_rows`) of at most ``batch_rows`` rows.

    Raises LakeError when the file cannot be read (gone, storage unreachable), LakeDataError when it
    is damaged (not Parquet, a page failing its checksum) or its columns do not convert to the log's.
    """
    try:
        with io.new_input(path).open() as stream:
            parquet = pq.ParquetFile(stream, page_checksum_verification=True)
            groups = _row_groups(parquet.metadata, start, end, path)
            for batch in parquet.iter_batches(batch_size=max(batch_rows, 1), row_groups=groups, columns=log_schema.names):
                offsets = batch.column(OFFSET_COLUMN)
                wanted = batch.filter(pc.and_(pc.greater_equal(offsets, start), pc.less(offsets, end)))
                if wanted.num_rows:
                    yield _converted(wanted, log_schema, path)
    except (OSError, pa.ArrowException) as exc:
        # A damaged file fails the same way on every retry: only storage trouble is retriable.
        damaged = isinstance(exc, pa.ArrowInvalid) or "checksum" in str(exc).lower()
        raise (LakeDataError if damaged else LakeError)(f"cannot read lake data file {path}: {exc}") from None


def _converted(rows: pa.RecordBatch, log_schema: pa.Schema, path: str) -> pa.RecordBatch:
    try:
        return to_log_rows(rows, log_schema)
    except (KeyError, pa.ArrowException) as exc:
        raise LakeDataError(f"lake data file {path} does not convert to the log's columns {log_schema}: {exc}") from None


def _row_groups(metadata: pq.FileMetaData, start: int, end: int, path: str) -> list[int]:
    """Row groups that may hold an offset in ``[start, end)`` (all of them without statistics)."""
    column = next((i for i in range(metadata.num_columns) if metadata.schema.column(i).path == OFFSET_COLUMN), None)
    if column is None:
        raise LakeDataError(f"lake data file {path} has no {OFFSET_COLUMN} column")
    groups = []
    for index in range(metadata.num_row_groups):
        stats = metadata.row_group(index).column(column).statistics
        if stats is None or not stats.has_min_max or (stats.max >= start and stats.min < end):
            groups.append(index)
    return groups
