"""What a Spark task of the ``iceberg`` LogSource runs: fetch the bytes of its part's row groups (the
wanted columns only) and hand them back as they are in the data file, in pieces; the client decodes
them (:mod:`lakelog.lake.fetched_row_groups`).

Why the file's own bytes and not decoded batches: Parquet's zstd pages are nearly as small as zstd
Arrow batches of the same rows, and a task that decodes and re-compresses them spends the CPU
twice, on top of the client's decompressing. A task that fetches leaves its worker nearly idle and
the client decodes once, as PyIceberg's ``to_arrow()`` does. Page checksums are then verified where
the rows are used.

Kept apart from the LogSource so that a Python worker imports only this, not PyIceberg's table and
catalog modules: a new Spark Connect session starts new workers, and their imports are part of a
client's first lake read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO, InputStream, load_file_io

from lakelog.errors import LakeDataError
from lakelog.lake.iceberg_file_reader import FileRange, reading, row_group_reads, wanted_row_groups
from lakelog.spark_runtime.worker_heap import freeze_worker_heap

# One row per piece: bytes [position, position + len(bytes)) of the part's data file, for row group
# ``row_group`` (FOOTER_GROUP: the file's footer, sent first when the client has not read it;
# DAMAGED_GROUP: why the file is damaged, in UTF-8, so that the client raises LakeDataError, as
# for a page failing its checksum, not the retriable error of a failed Spark job); ``last`` marks a
# row group's (or the footer's) last piece.
PIECE_DDL = "part int, row_group int, position long, bytes binary, last boolean"
FOOTER_GROUP = -1
DAMAGED_GROUP = -2
# A row group's bytes are cut into pieces of at most this size, so that a row stays well inside
# Spark Connect's answers (4 MB Arrow batches, 128 MB messages) whatever size the writer gave its
# row groups.
PIECE_BYTES = 4 << 20
_FOOTER_TAIL = 8  # the footer's length (4 bytes) and the closing magic


@dataclass(frozen=True)
class FilePart:
    """Row groups ``row_groups`` (None: every one holding offsets of the range) of a data file,
    read within ``file``'s offset range: one partition. ``footer`` is the file's footer when the
    client read it to plan the parts, so that each of the file's tasks does not read it again."""

    file: FileRange
    row_groups: tuple[int, ...] | None = None
    footer: pq.FileMetaData | None = None


@dataclass(frozen=True)
class LakeRead:
    """What the tasks of one read need (pickled with them): partition i fetches ``parts[i]``, the
    column chunks of ``columns``."""

    io_properties: Mapping[str, str]
    parts: Sequence[FilePart]
    columns: Sequence[str]


def plan_parts(io: FileIO, files: Sequence[FileRange], part_rows: int) -> list[FilePart]:
    """A read's files as partitions. A task's rows reach the client only once the task is done, so
    the first file is split by its footer (read here): its first row group alone, then row groups
    up to ``part_rows`` rows each. A read's first records then come after one row group is read,
    not a whole file (seconds, for a file of a million records). Later files stay a partition each: by then records stream, and reading every footer
    here would cost a request per file before the job starts."""
    if not files:
        return []
    parts: list[FilePart] = []
    groups: list[int] = []
    rows = 0
    for unit in row_group_reads(io, files[0]):
        groups.append(unit.group)
        rows += unit.metadata.row_group(unit.group).num_rows
        if not parts or rows >= part_rows:
            parts.append(FilePart(files[0], tuple(groups), unit.metadata))
            groups, rows = [], 0
    if groups:
        parts.append(FilePart(files[0], tuple(groups), unit.metadata))
    return parts + [FilePart(file) for file in files[1:]]


def fetch_parts_in_task(read: LakeRead, indexes: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A ``mapInArrow`` function over part indexes: each part's pieces (:data:`PIECE_DDL`), in file order."""
    freeze_worker_heap()
    for numbers in indexes:
        for index in numbers.column(0).to_pylist():
            try:
                yield from _part_pieces(read, index)
            except LakeDataError as damaged:
                yield _piece(index, DAMAGED_GROUP, 0, str(damaged).encode(), True)


def _part_pieces(read: LakeRead, index: int) -> Iterator[pa.RecordBatch]:
    part = read.parts[index]
    path = part.file.path
    with reading(path), load_file_io(dict(read.io_properties), path).new_input(path).open() as stream:
        footer = part.footer
        if footer is None:
            position, tail = _footer(stream, path)
            yield _piece(index, FOOTER_GROUP, position, tail, True)
            footer = pq.read_metadata(pa.BufferReader(tail))
        for unit in wanted_row_groups(part.file, footer):
            if part.row_groups is None or unit.group in part.row_groups:
                ranges = column_chunk_ranges(footer, unit.group, read.columns)
                for number, (start, end) in enumerate(ranges, 1):
                    yield from _range_pieces(index, unit.group, stream, start, end, path, number == len(ranges))


def column_chunk_ranges(metadata: pq.FileMetaData, group: int, columns: Sequence[str]) -> list[tuple[int, int]]:
    """The byte ranges ``[start, end)`` of row group ``group``'s chunks of ``columns``, adjacent
    ones merged: what Arrow's Parquet reader reads of a file to decode them (the dictionary page,
    when there is one, is where a chunk starts)."""
    wanted = set(columns)
    row_group = metadata.row_group(group)
    ranges: list[tuple[int, int]] = []
    for i in range(row_group.num_columns):
        chunk = row_group.column(i)
        path = chunk.path_in_schema
        if path not in wanted and path.split(".")[0] not in wanted:  # a nested column's leaves, as pyarrow names them
            continue
        start = chunk.data_page_offset
        if chunk.has_dictionary_page and 0 < chunk.dictionary_page_offset < start:
            start = chunk.dictionary_page_offset
        end = start + chunk.total_compressed_size
        if ranges and ranges[-1][1] == start:
            ranges[-1] = (ranges[-1][0], end)
        else:
            ranges.append((start, end))
    return sorted(ranges)


def _footer(stream: InputStream, path: str) -> tuple[int, bytes]:
    """Where the file's footer (with its length and closing magic) starts, and its bytes."""
    stream.seek(0, 2)
    size = stream.tell()
    if size < _FOOTER_TAIL:
        raise LakeDataError(f"cannot read lake data file {path}: {size} bytes, too short for Parquet")
    stream.seek(size - _FOOTER_TAIL)
    length_and_magic = _read_exactly(stream, _FOOTER_TAIL, path)
    length = struct.unpack("<i", length_and_magic[:4])[0]
    if length_and_magic[4:] != b"PAR1" or not 0 < length <= size - _FOOTER_TAIL:
        raise LakeDataError(f"cannot read lake data file {path}: it does not end with a Parquet footer")
    stream.seek(size - _FOOTER_TAIL - length)
    return size - _FOOTER_TAIL - length, _read_exactly(stream, length, path) + length_and_magic


def _read_exactly(stream: InputStream, size: int, path: str) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise LakeDataError(f"cannot read lake data file {path}: shorter than its footer says ({len(data)} of {size} bytes read)")
    return data


def _range_pieces(
    part: int, group: int, stream: InputStream, start: int, end: int, path: str, last_range: bool
) -> Iterator[pa.RecordBatch]:
    stream.seek(start)
    for position in range(start, end, PIECE_BYTES):
        size = min(PIECE_BYTES, end - position)
        yield _piece(part, group, position, _read_exactly(stream, size, path), last_range and position + size == end)


def _piece(part: int, group: int, position: int, data: bytes, last: bool) -> pa.RecordBatch:
    offsets = pa.array([0, len(data)], pa.int32()).buffers()[1]
    cell = pa.Array.from_buffers(pa.binary(), 1, [None, offsets, pa.py_buffer(data)])  # the read's buffer, not a copy
    return pa.record_batch(
        [pa.array([part], pa.int32()), pa.array([group], pa.int32()), pa.array([position], pa.int64()), cell, pa.array([last])],
        names=["part", "row_group", "position", "bytes", "last"],
    )
