"""The client's half of the ``iceberg`` LogSource: Spark tasks fetch a read's row groups as pieces of
their data files (:mod:`lakelog.lake.spark_file_task`); here each row group's pieces are put back at
their places in the file and decoded with the iceberg-arrow LogSource's reader, up to ``workers``
row groups at once (Parquet decoding releases the GIL), results in order.

Memory: the pieces of the row group being received, and at most ``workers`` row groups being
decoded; never a whole file or range.
"""

from __future__ import annotations

import bisect
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from lakelog.errors import LakeDataError
from lakelog.lake.iceberg_file_reader import RowGroupRead, decode_row_group, reading
from lakelog.lake.row_group_queue import RowGroupQueue
from lakelog.lake.spark_file_task import DAMAGED_GROUP, FOOTER_GROUP, FilePart


class FilePieces:
    """Pieces of one data file at their places: enough of the file for pyarrow's Parquet reader
    (through ``pa.PythonFile``) to decode the row group they hold. Reads within a piece return a
    view of it, not a copy."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._starts: list[int] = []
        self._pieces: list[memoryview] = []
        self._position = 0
        self.closed = False

    def add(self, position: int, data: bytes | bytearray | memoryview) -> None:
        """Pieces come in file order (as a task sends them)."""
        self._starts.append(position)
        self._pieces.append(memoryview(data))

    @property
    def size(self) -> int:
        return self._starts[-1] + len(self._pieces[-1]) if self._pieces else 0

    def read(self, size: int = -1) -> memoryview | bytes:
        start = self._position
        end = self.size if size < 0 else min(start + size, self.size)
        parts = []
        position = start
        while position < end:
            index = bisect.bisect_right(self._starts, position) - 1  # the last piece starting at or before position
            offset = position - self._starts[index] if index >= 0 else -1
            if not 0 <= offset < len(self._pieces[index]):
                raise LakeDataError(f"lake data file {self._path}: bytes {position}-{end} were not fetched with its row group")
            parts.append(self._pieces[index][offset : offset + end - position])
            position += len(parts[-1])
        self._position = position
        return parts[0] if len(parts) == 1 else b"".join(parts)  # b"" at the end

    def seek(self, offset: int, whence: int = 0) -> int:
        self._position = offset if whence == 0 else self._position + offset if whence == 1 else self.size + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


def decode_fetched(
    pieces: Iterable[Sequence[Any]], parts: Sequence[FilePart], log_schema: pa.Schema, batch_rows: int, workers: int
) -> Iterator[pa.RecordBatch]:
    """The rows of ``pieces`` (a read's task output, in order: part, row group, position, bytes,
    last) as batches of ``log_schema``: each row group decoded once its last piece is in."""
    footers = {index: part.footer for index, part in enumerate(parts) if part.footer is not None}
    received: FilePieces | None = None
    queue = RowGroupQueue(workers)
    with ThreadPoolExecutor(max(workers, 1), thread_name_prefix="lake-row-group") as pool:
        try:
            for index, group, position, data, last in pieces:
                file = parts[index].file
                if group == DAMAGED_GROUP:  # after the rows before it, as a reader of the files in order fails
                    yield from queue.drain()
                    raise LakeDataError(bytes(data).decode())
                if group == FOOTER_GROUP:
                    with reading(file.path):
                        footers[index] = pq.read_metadata(pa.BufferReader(data))
                    continue
                if received is None:
                    received = FilePieces(file.path)
                received.add(position, data)
                if last:
                    unit = RowGroupRead(file, footers[index], group)
                    yield from queue.push(pool.submit(_decoded, received, unit, log_schema, batch_rows))
                    received = None
            yield from queue.drain()
        finally:
            queue.cancel()


def _decoded(received: FilePieces, unit: RowGroupRead, log_schema: pa.Schema, batch_rows: int) -> list[pa.RecordBatch]:
    return list(decode_row_group(pa.PythonFile(received, mode="r"), unit, log_schema, batch_rows))
