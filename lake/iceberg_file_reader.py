"""Reading the data files of a lake table, row group by row group, as log rows.

Both Iceberg LogSources decode files here: ``iceberg-arrow`` reads them in-process, row groups in
parallel (:func:`read_lake_files`); ``iceberg`` decodes the bytes its Spark tasks fetched
(:func:`decode_row_group`, see :mod:`lakelog.lake.fetched_row_groups`).
Only the wanted columns are read, row groups wholly outside the offset range are skipped by their
Parquet statistics, rows are filtered only in the row groups at a range's edges (a file's rows are
sorted by offset), and each batch is cast once, into the log's schema.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO

from lakelog.errors import LakeDataError, LakeError
from lakelog.lake.log_rows import file_columns, to_log_rows
from lakelog.lake.row_group_queue import RowGroupQueue
from lakelog.record.meta_columns import OFFSET_COLUMN


# A file this small is read whole with one request and decoded in one task, ahead of the consumer:
# for it, opening the file and reading its footer, then each row group, cost more than decoding.
WHOLE_FILE_BYTES = 1 << 20
# Row groups up to this many rows decode on the reading thread, larger ones on Arrow's pool too.
POOLED_ROW_GROUP_ROWS = 8192


@dataclass(frozen=True, slots=True)
class FileRange:
    """Offsets ``[start, end)`` of the data file at ``path``, of ``size`` bytes (0: not known)."""

    path: str
    start: int
    end: int
    size: int = 0

    @property
    def read_whole(self) -> bool:
        return 0 < self.size <= WHOLE_FILE_BYTES


@dataclass(frozen=True, slots=True)
class RowGroupRead:
    """Row group ``group`` of ``file`` (whose footer is ``metadata``): one unit of parallel reading."""

    file: FileRange
    metadata: pq.FileMetaData
    group: int


def read_lake_file(
    io: FileIO,
    path: str,
    log_schema: pa.Schema,
    start: int,
    end: int,
    batch_rows: int,
    row_groups: Sequence[int] | None = None,
    footer: pq.FileMetaData | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of ``path`` with offsets in ``[start, end)``, in file order, as batches of
    ``log_schema`` (see :func:`lakelog.lake.log_rows.to_log_rows`) of at most ``batch_rows`` rows;
    with ``row_groups``, only the rows of those row groups; with ``footer`` (the file's, read
    earlier), without reading the footer again.

    Raises LakeError when the file cannot be read (gone, storage unreachable), LakeDataError when it
    is damaged (not Parquet, a page failing its checksum) or its columns do not convert to the log's.
    """
    file = FileRange(path, start, end)
    with reading(path):
        with io.new_input(path).open() as stream:  # one open for the footer and every row group
            parquet = pq.ParquetFile(stream, metadata=footer, page_checksum_verification=True)
            for unit in wanted_row_groups(file, parquet.metadata):
                if row_groups is not None and unit.group not in row_groups:
                    continue
                yield from _log_batches(parquet.read_row_group(unit.group, columns=file_columns(parquet.schema_arrow.names, log_schema)), file, log_schema, batch_rows)


def read_lake_files(
    io: FileIO, files: Sequence[FileRange], log_schema: pa.Schema, batch_rows: int, workers: int
) -> Iterator[pa.RecordBatch]:
    """Like :func:`read_lake_file` over ``files`` one after the other, with up to ``workers`` row
    groups read at once (Parquet decoding releases the GIL). Results come back in order and at
    most ``workers`` row groups are read ahead of the consumer: a bounded queue, not the snapshot.

    The next ``workers`` files are opened meanwhile too: a large one's footer is read, a small one
    (:data:`WHOLE_FILE_BYTES`) is read whole and decoded, since with many small files the per-file
    cost, not the decoding, sets the time. Memory stays bounded: at most ``workers`` small files
    and ``workers`` row groups are held ahead of the consumer."""
    if workers <= 1:
        for file in files:
            yield from read_lake_file(io, file.path, log_schema, file.start, file.end, batch_rows)
        return
    queue = RowGroupQueue(workers)
    ahead: deque[tuple[FileRange, Future[Any]]] = deque()
    remaining = iter(files)
    with ThreadPoolExecutor(workers, thread_name_prefix="lake-row-group") as pool:

        def open_files_ahead() -> None:
            while len(ahead) < workers and (file := next(remaining, None)) is not None:
                if file.read_whole:
                    ahead.append((file, pool.submit(read_whole_file, io, file, log_schema, batch_rows)))
                else:
                    ahead.append((file, pool.submit(row_group_reads, io, file)))

        try:
            open_files_ahead()
            while ahead:
                file, opened = ahead.popleft()
                open_files_ahead()
                if file.read_whole:
                    yield from queue.push(opened)
                    continue
                for unit in opened.result():
                    yield from queue.push(pool.submit(read_row_group_batches, io, unit, log_schema, batch_rows))
            yield from queue.drain()
        finally:
            queue.cancel()
            for _, future in ahead:
                future.cancel()


def read_whole_file(io: FileIO, file: FileRange, log_schema: pa.Schema, batch_rows: int) -> list[pa.RecordBatch]:
    """The rows of a small ``file`` within its range: its bytes fetched with one read, then decoded."""
    with reading(file.path):
        with io.new_input(file.path).open() as stream:
            buffer = pa.BufferReader(stream.read())
        # One reader for the footer and every row group: a reader per row group parses the footer and
        # builds the Arrow schema again, about a fifth of what decoding a 200-row file costs.
        parquet = pq.ParquetFile(buffer, page_checksum_verification=True)
        metadata = parquet.metadata
        columns = file_columns(parquet.schema_arrow.names, log_schema)
        batches: list[pa.RecordBatch] = []
        for unit in wanted_row_groups(file, metadata):
            # A row group of a few thousand rows costs less to decode than to hand to Arrow's pool.
            threads = metadata.row_group(unit.group).num_rows > POOLED_ROW_GROUP_ROWS
            batches += _log_batches(parquet.read_row_group(unit.group, columns=columns, use_threads=threads), file, log_schema, batch_rows)
        return batches


def row_group_reads(io: FileIO, file: FileRange) -> list[RowGroupRead]:
    """The row groups of ``file`` that may hold an offset of its range (all of them without statistics)."""
    with reading(file.path):
        with io.new_input(file.path).open() as stream:
            metadata = pq.ParquetFile(stream).metadata
    return wanted_row_groups(file, metadata)


def wanted_row_groups(file: FileRange, metadata: pq.FileMetaData) -> list[RowGroupRead]:
    """The row groups of ``file`` (whose footer is ``metadata``) that may hold an offset of its range."""
    schema = metadata.schema
    column = next((i for i, name in enumerate(schema.names) if name == OFFSET_COLUMN and schema.column(i).path == OFFSET_COLUMN), None)
    if column is None:
        raise LakeDataError(f"lake data file {file.path} has no {OFFSET_COLUMN} column")
    units = []
    for index in range(metadata.num_row_groups):
        stats = metadata.row_group(index).column(column).statistics
        if stats is None or not stats.has_min_max or (stats.max >= file.start and stats.min < file.end):
            units.append(RowGroupRead(file, metadata, index))
    return units


def read_row_group_batches(io: FileIO, unit: RowGroupRead, log_schema: pa.Schema, batch_rows: int) -> list[pa.RecordBatch]:
    return list(read_row_group(io, unit, log_schema, batch_rows))


def read_row_group(io: FileIO, unit: RowGroupRead, log_schema: pa.Schema, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The rows of one row group within its file's range, as batches of ``log_schema``."""
    with reading(unit.file.path):
        with io.new_input(unit.file.path).open() as stream:
            return decode_row_group(stream, unit, log_schema, batch_rows)


def decode_row_group(
    source: Any, unit: RowGroupRead, log_schema: pa.Schema, batch_rows: int, use_threads: bool = True
) -> Iterator[pa.RecordBatch]:
    """Like :func:`read_row_group`, from ``source``: the file, or any file-like object that holds
    at least the bytes of the row group's wanted columns at their places in the file. Without
    ``use_threads`` its columns decode on this thread, not on Arrow's pool."""
    with reading(unit.file.path):
        parquet = pq.ParquetFile(source, metadata=unit.metadata, page_checksum_verification=True)
        columns = file_columns(parquet.schema_arrow.names, log_schema)
        rows = parquet.read_row_group(unit.group, columns=columns, use_threads=use_threads)
    return _log_batches(rows, unit.file, log_schema, batch_rows)


def _log_batches(rows: pa.Table, file: FileRange, log_schema: pa.Schema, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """A row group's rows within the file's offset range, as batches of ``log_schema``."""
    for batch in rows.to_batches(max_chunksize=max(batch_rows, 1)):
        offsets = batch.column(OFFSET_COLUMN)
        if not len(offsets):
            continue
        if offsets[0].as_py() < file.start or offsets[-1].as_py() >= file.end:
            batch = batch.filter(pc.and_(pc.greater_equal(offsets, file.start), pc.less(offsets, file.end)))
        if batch.num_rows:
            yield _converted(batch, log_schema, file.path)


@contextmanager
def reading(path: str) -> Iterator[None]:
    """Failures reading the data file at ``path`` as lakelog's errors naming it."""
    try:
        yield
    except (OSError, pa.ArrowException) as exc:
        # A damaged file fails the same way on every retry: only storage trouble is retriable.
        damaged = isinstance(exc, pa.ArrowInvalid) or "checksum" in str(exc).lower()
        raise (LakeDataError if damaged else LakeError)(f"cannot read lake data file {path}: {exc}") from None


def _converted(rows: pa.RecordBatch, log_schema: pa.Schema, path: str) -> pa.RecordBatch:
    try:
        return to_log_rows(rows, log_schema)
    except (KeyError, pa.ArrowException) as exc:
        raise LakeDataError(f"lake data file {path} does not convert to the log's columns {log_schema}: {exc}") from None
