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
