"""The compaction's Spark task: rewrite one bin of neighbouring lake files as one file.

It runs on Spark's Python workers and reads and writes through the lake table's own FileIO, row
group by row group (memory holds about one row group and a few small files read ahead, whatever
the bin's size). Every input row
group is checked to continue the offsets exactly where the previous one ended, so a bin that is not
one run of consecutive offsets fails its task instead of reaching the lake.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO, load_file_io

from lakelog.errors import LakeDataError, LakeError
from lakelog.lake.iceberg_file_reader import WHOLE_FILE_BYTES, reading
from lakelog.lake.iceberg_scan_planner import LakeDataFile
from lakelog.lake.schema_mapping import in_current_schema
from lakelog.record.meta_columns import OFFSET_COLUMN
from lakelog.spark_runtime.worker_heap import freeze_worker_heap
from lakelog.tiering.compaction_planner import CompactionBin
from lakelog.tiering.split_writer import lake_file_writer, row_groups

# Files of a bin read ahead of the one being written (each small one held whole: a few MB at most).
READ_AHEAD_FILES = 4
RESULT_DDL = "bin int, file_path string, record_count long, file_size_bytes long"
RESULT_SCHEMA = pa.schema([("bin", pa.int32()), ("file_path", pa.string()), ("record_count", pa.int64()), ("file_size_bytes", pa.int64())])


@dataclass(frozen=True)
class CompactedFile:
    """The file a task wrote for bin number ``bin``."""

    bin: int
    file_path: str
    record_count: int
    file_size_bytes: int


@dataclass(frozen=True)
class CompactionSettings:
    """What a task needs: the lake's storage properties and the lake table's current Arrow schema
    (Parquet field ids included)."""

    io_properties: Mapping[str, str]
    lake_schema: pa.Schema


def compact_bins(settings: CompactionSettings, bins: Sequence[CompactionBin], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A ``mapInArrow`` function: its input rows are indexes into ``bins``; each bin becomes a file
    and an output row (:data:`RESULT_SCHEMA`)."""
    freeze_worker_heap()
    for batch in batches:
        for index in batch.column(0).to_pylist():
            written = compact_bin(settings, index, bins[index])
            yield pa.RecordBatch.from_pylist([asdict(written)], schema=RESULT_SCHEMA)


def compact_bin(settings: CompactionSettings, index: int, compaction: CompactionBin) -> CompactedFile:
    io = load_file_io(dict(settings.io_properties), compaction.file_path)
    try:
        with io.new_output(compaction.file_path).create(overwrite=True) as out:
            with lake_file_writer(out, settings.lake_schema) as writer:
                for rows in row_groups(_bin_rows(io, compaction, settings.lake_schema)):
                    writer.write_table(rows, row_group_size=rows.num_rows)
            size = out.tell()  # type: ignore[attr-defined]
    except (OSError, pa.ArrowException) as exc:
        raise LakeError(f"cannot write {compaction.file_path}: {exc}") from exc
    return CompactedFile(index, compaction.file_path, compaction.record_count, size)


def _bin_rows(io: FileIO, compaction: CompactionBin, schema: pa.Schema) -> Iterator[pa.Table]:
    """The bin's rows, file after file, row group by row group, each checked to continue the offsets.
    The next files are read ahead on a few threads (a small file whole, with one request, and
    decoded there): with many small files, opening each one is most of the work."""
    expected = compaction.first_offset
    with ThreadPoolExecutor(READ_AHEAD_FILES, thread_name_prefix="compaction-read") as pool:
        ahead: deque[tuple[LakeDataFile, Future[list[pa.Table]] | None]] = deque()
        remaining = iter(compaction.files)

        def read_ahead() -> None:
            while len(ahead) < READ_AHEAD_FILES and (file := next(remaining, None)) is not None:
                small = 0 < file.size_bytes <= WHOLE_FILE_BYTES
                ahead.append((file, pool.submit(_whole_file_rows, io, file.path) if small else None))

        read_ahead()
        while ahead:
            file, read = ahead.popleft()
            read_ahead()
            for rows in read.result() if read is not None else _streamed_rows(io, file.path):
                expected = _continued(rows.column(OFFSET_COLUMN), expected, file.path)
                yield in_current_schema(rows, schema)
            if expected != file.last_offset + 1:
                raise LakeDataError(f"lake data file {file.path} ends at offset {expected - 1}, its statistics say {file.last_offset}")


def _whole_file_rows(io: FileIO, path: str) -> list[pa.Table]:
    """A small file's row groups, its bytes fetched with one read."""
    with reading(path):
        with io.new_input(path).open() as stream:
            parquet = pq.ParquetFile(pa.BufferReader(stream.read()), page_checksum_verification=True)
        return [parquet.read_row_group(group) for group in range(parquet.metadata.num_row_groups)]


def _streamed_rows(io: FileIO, path: str) -> Iterator[pa.Table]:
    """A larger file's row groups, one at a time."""
    with reading(path), io.new_input(path).open() as stream:
        parquet = pq.ParquetFile(stream, page_checksum_verification=True)
        for group in range(parquet.metadata.num_row_groups):
            yield parquet.read_row_group(group)


def _continued(offsets: pa.ChunkedArray, expected: int, path: str) -> int:
    """``offsets`` are exactly ``expected, expected + 1, ...``: returns the next one expected."""
    values = offsets.combine_chunks()
    count = len(values)
    if not count:
        return expected
    first, last = values[0].as_py(), values[-1].as_py()
    increasing = count == 1 or pc.all(pc.greater(values[1:], values[:-1])).as_py()
    if first != expected or last != expected + count - 1 or not increasing:
        raise LakeDataError(
            f"lake data file {path}: {count} rows at offsets {first}..{last} do not continue the bucket at offset {expected}"
        )
    return last + 1
