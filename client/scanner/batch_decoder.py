"""Fetched batches decoded into Arrow tables with lakelog's own columns.

Every batch is checked against its CRC here, on the reader's side, whichever tier served it. The
Arrow bodies are decoded in place (the received buffer is never copied) and the meta columns are
built once per table returned, not per batch or per record: one ``__bucket`` array, one
``__offset`` ramp while offsets run on (as they do within a fetch answer or a segment), one
``__timestamp`` array while batches share a commit timestamp.
"""

from __future__ import annotations

import itertools
import sys
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import CorruptRecordError
from lakelog.record import batch as rb
from lakelog.record.projection import present
from lakelog.schema_evolution import conform

_META_COLUMNS = 3  # __bucket, __offset, __timestamp: the last fields of every output schema

_ramp: pa.Array = pa.array([], pa.int64())  # 1, 2, 3, ...


def offsets_array(start: int, count: int) -> pa.Array:
    """``start, start + 1, ...``: a slice of a cached ``1, 2, 3, ...`` plus ``start - 1``, one vectorized
    add. The ramp is a cumulative sum of ones, built in one vectorized call: from a Python ``range``,
    4 M entries take 0.3-0.6 s, which a process's first large answer would wait for."""
    global _ramp
    ramp = _ramp
    if len(ramp) < count:
        ramp = _ramp = pc.cumulative_sum(constant_array(1, max(count, 2 * len(ramp)), pa.int64()))
    return pc.add(ramp.slice(0, count), pa.scalar(start - 1, pa.int64()))


def constant_array(value: int, count: int, type: pa.DataType) -> pa.Array:
    """``count`` times ``value`` of the integer ``type``: its bytes repeated (one doubling copy in
    C) and wrapped without a copy. ``pa.repeat`` of an integer scalar is far slower (it would be
    the most expensive step of a decoded answer), and adding ``value`` to cached zeros takes 3-4
    times as long up to 100,000 rows (answers are mostly smaller), about as long beyond."""
    item = value.to_bytes(type.byte_width, sys.byteorder, signed=value < 0)
    return pa.Array.from_buffers(type, count, [None, pa.py_buffer(item * count)])


class BatchDecoder:
    """Collects one bucket's batches, in offset order, into one table of ``out_schema``.

    ``projection`` selects columns of batches the server did not project (a remote segment holds
    batches as produced); a batch whose column types differ from ``out_schema`` is an error.
    """

    def __init__(self, bucket: int, out_schema: pa.Schema, projection: Sequence[int] | None = None) -> None:
        self._bucket = bucket
        self._out_schema = out_schema
        self._data_schema = pa.schema(list(out_schema)[:-_META_COLUMNS])
        self._types = self._data_schema.types
        self._projection = list(projection) if projection else None
        self._bodies = rb.BodyDecoder()
        self._batches: list[pa.RecordBatch] = []
        self._starts: list[int] = []
        self._timestamps: list[int] = []
        self.rows = 0

    def __len__(self) -> int:
        """Batches collected so far."""
        return len(self._batches)

    def add(self, buf: bytes | memoryview, pos: int, fetch_offset: int, where: str, limit: int | None = None) -> rb.BatchHeader:
        """Check the batch at ``pos`` and keep its records from ``fetch_offset`` on, at most
        ``limit`` of them (None: all); its header."""
        header = rb.validate(buf, pos, where)
        skip = max(fetch_offset - header.base_offset, 0)
        if skip >= header.record_count:
            return header
        data = self._bodies.decode(buf, pos, header)
        if data.num_rows != header.record_count:
            raise CorruptRecordError(
                f"{where}: batch at offset {header.base_offset} says it holds {header.record_count} records, "
                f"its Arrow body holds {data.num_rows}"
            )
        if self._projection:
            data = data.select(present(self._projection, data.num_columns))
        if data.schema.types != self._types:  # written under an older schema (or not one of the table's)
            data = conform(data, self._data_schema, f"{where}: batch at offset {header.base_offset}")
        elif data.schema != self._data_schema:  # same types, other names or nullability
            data = pa.RecordBatch.from_arrays(data.columns, schema=self._data_schema)
        if skip or (limit is not None and limit < header.record_count - skip):
            data = data.slice(skip, limit)
        self._batches.append(data)
        self._starts.append(header.base_offset + skip)
        self._timestamps.append(header.commit_timestamp)
        self.rows += data.num_rows
        return header

    def to_table(self) -> pa.Table:
        """Everything collected, with ``__bucket``, ``__offset`` and ``__timestamp``."""
        if not self._batches:
            return self._out_schema.empty_table()
        counts = [batch.num_rows for batch in self._batches]
        total = sum(counts)
        data = pa.Table.from_batches(self._batches, schema=self._data_schema)
        bucket = constant_array(self._bucket, total, pa.int32())
        columns = [*data.columns, bucket, self._offsets(counts, total), self._timestamp_column(counts, total)]
        return pa.Table.from_arrays(columns, schema=self._out_schema)

    def _offsets(self, counts: list[int], total: int) -> pa.Array | pa.ChunkedArray:
        starts = self._starts
        if all(starts[i + 1] == starts[i] + counts[i] for i in range(len(starts) - 1)):
            return offsets_array(starts[0], total)
        return pa.chunked_array([offsets_array(start, count) for start, count in zip(starts, counts)], pa.int64())

    def _timestamp_column(self, counts: list[int], total: int) -> pa.Array | pa.ChunkedArray:
        stamps = self._timestamps
        if stamps.count(stamps[0]) == len(stamps):
            return constant_array(stamps[0], total, pa.int64())
        # One run per batch, decoded in one call: an array per batch cost a fifth of a projected read.
        ends = pa.array(itertools.accumulate(counts), pa.int64())
        return pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(ends, pa.array(stamps, pa.int64())))


def cut_short(header: rb.BatchHeader, fetch_offset: int, taken: int) -> bool:
    """Of the batch ``header`` heads, fewer records from ``fetch_offset`` on were taken than it holds."""
    return max(fetch_offset, header.base_offset) + taken < header.next_offset


def decode_records(
    records: bytes | memoryview, bucket: int, fetch_offset: int, out_schema: pa.Schema, where: str, max_records: int | None = None
) -> tuple[pa.Table, int]:
    """The batches in ``records`` (already projected by the server) from ``fetch_offset`` on, at most
    ``max_records`` records (None: all), decoded; and where in ``records`` the first batch not
    wholly returned starts (``len(records)`` when none is left): the rest stays undecoded."""
    view = memoryview(records)
    decoder = BatchDecoder(bucket, out_schema)
    pos = 0
    while pos < len(view):
        limit = None if max_records is None else max_records - decoder.rows
        if limit is not None and limit <= 0:
            break
        before = decoder.rows
        header = decoder.add(view, pos, fetch_offset, where, limit)
        if cut_short(header, fetch_offset, decoder.rows - before):
            break
        pos += header.size
    return decoder.to_table(), pos
