"""What a Spark task of the ``iceberg`` LogSource runs: read its data file, hand each batch back
as a zstd-compressed Arrow IPC stream in a binary column (so every Arrow type survives Spark's own types).

Kept apart from the LogSource so that a Python worker imports only the file reader, not PyIceberg's
table and catalog modules: a new Spark Connect session starts new workers, and their imports are
part of a client's first lake read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO, load_file_io

from lakelog.lake.iceberg_file_reader import FileRange, read_lake_file, row_group_reads
from lakelog.spark_worker_heap import freeze_worker_heap

IPC_COLUMN = "ipc"
# Compressed, because each batch crosses Spark's JVM several times (from the Python worker, into
# rows, into Connect's answer) and the JVM's time grows with the bytes it carries: LZ4 took it from
# 5 s to 3 s of CPU per warm read of 5 M records. zstd (Arrow's default level) is 4.5 times smaller
# than LZ4 on the benchmark's numbers (9x against 2x) for 0.35 s more of the tasks' CPU (1.96 s
# against 1.60 s for the same files): the JVM's CPU went from 3 s to 1.7-2.3 s, the read from
# 3.3-3.8 s to 2.7-3.2 s. Readers of an IPC stream decompress it themselves.
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")


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
    """What the tasks of one read need (pickled with them): partition i reads ``parts[i]``."""

    io_properties: Mapping[str, str]
    parts: Sequence[FilePart]
    log_schema: pa.Schema
    batch_rows: int


def plan_parts(io: FileIO, files: Sequence[FileRange], part_rows: int) -> list[FilePart]:
    """A read's files as partitions. A task's rows reach the client only once the task is done, so
    the first file is split by its footer (read here): its first row group alone, then row groups
    up to ``part_rows`` rows each. A read's first records then come after one row group is read,
    not a whole file (1.4 s for a file of a million records, 2.4 s to a new client's first
    records). Later files stay a partition each: by then records stream, and reading every footer
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


def read_files_in_task(read: LakeRead, indexes: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A ``mapInArrow`` function over part indexes: each batch of a part becomes one row holding
    its IPC stream."""
    freeze_worker_heap()
    for numbers in indexes:
        for index in numbers.column(0).to_pylist():
            part = read.parts[index]
            file = part.file
            io = load_file_io(dict(read.io_properties), file.path)
            for batch in read_lake_file(
                io, file.path, read.log_schema, file.start, file.end, read.batch_rows, part.row_groups, part.footer
            ):
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, batch.schema, options=_IPC_OPTIONS) as writer:
                    writer.write_batch(batch)
                stream = sink.getvalue()
                offsets = pa.array([0, stream.size], pa.int32()).buffers()[1]
                cell = pa.Array.from_buffers(pa.binary(), 1, [None, offsets, stream])  # the stream's buffer, not a copy
                yield pa.record_batch([cell], names=[IPC_COLUMN])
