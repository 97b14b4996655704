"""The benchmark table: 10 numeric columns (5 int64, 5 float64), values cheap to generate."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

COLUMNS = 10
SCHEMA = pa.schema(
    [pa.field(f"i{n}", pa.int64()) for n in range(COLUMNS // 2)]
    + [pa.field(f"f{n}", pa.float64()) for n in range(COLUMNS // 2)]
)
RECORD_BYTES = 8 * COLUMNS
CHUNK_RECORDS = 10_000


def rows(start: int, count: int) -> pa.RecordBatch:
    """Records ``start .. start + count - 1``; every column differs, so nothing compresses to nothing."""
    ids = np.arange(start, start + count, dtype=np.int64)
    ints = [pa.array(ids * (n + 1)) for n in range(COLUMNS // 2)]
    floats = [pa.array(ids * 0.5 + n) for n in range(COLUMNS // 2)]
    return pa.record_batch(ints + floats, schema=SCHEMA)


def chunks(count: int, start: int = 0, size: int = CHUNK_RECORDS) -> list[pa.RecordBatch]:
    """``count`` records as batches of ``size``, made before a timed run so generating them is not timed."""
    return [rows(first, min(size, start + count - first)) for first in range(start, start + count, size)]


def records_for_bytes(size: int) -> int:
    return max(size // RECORD_BYTES, 1)


def wide_schema(columns: int) -> pa.Schema:
    """``columns`` int64 columns: the record width of the scaling benchmark."""
    return pa.schema([pa.field(f"c{n}", pa.int64()) for n in range(columns)])


def wide_chunks(schema: pa.Schema, count: int, size: int = CHUNK_RECORDS) -> list[pa.RecordBatch]:
    """``count`` records of ``schema`` (int64 columns) as batches of ``size``."""
    out = []
    for first in range(0, count, size):
        ids = np.arange(first, min(first + size, count), dtype=np.int64)
        out.append(pa.record_batch([pa.array(ids * (n + 1)) for n in range(len(schema))], schema=schema))
    return out
