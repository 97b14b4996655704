"""Lake data files written as tiering writes them, without a lake."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def lake_file(path: Path, first: int, rows: int, row_group_rows: int) -> str:
    """A lake data file as tiering writes it: ``id`` widened to int64, ``__timestamp`` in µs."""
    offsets = pa.array(range(first, first + rows), pa.int64())
    table = pa.table({
        "id": offsets,
        "__bucket": pa.array([0] * rows, pa.int32()),
        "__offset": offsets,
        "__timestamp": pa.array([o * 1000 for o in range(first, first + rows)], pa.timestamp("us", tz="UTC")),
    })
    pq.write_table(table, path, row_group_size=row_group_rows)
    return str(path)
