"""Fetched batches decoded into Arrow tables with lakelog's own columns.

Every batch is checked against its CRC here, on the reader's side, whichever tier served it.
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import SchemaMismatchError
from lakelog.record import batch as rb


_ramp: pa.Array = pa.array([], pa.int64())


def offsets_array(start: int, count: int) -> pa.Array:
    """``start, start + 1, ...``: a slice of a cached ``0, 1, 2, ...`` plus ``start``, one vectorized
    add, because building it from a Python ``range`` cost more than decoding the batch."""
    global _ramp
    ramp = _ramp
    if len(ramp) < count:
        ramp = _ramp = pa.array(range(max(count, 2 * len(ramp))), pa.int64())
    return pc.add(ramp.slice(0, count), pa.scalar(start, pa.int64()))


def decode_batch(
    buf: bytes | memoryview,
    pos: int,
    bucket: int,
    fetch_offset: int,
    out_schema: pa.Schema,
    where: str,
    projection: Sequence[int] | None = None,
) -> tuple[rb.BatchHeader, pa.RecordBatch | None]:
    """The batch at ``pos``, CRC-checked, as Arrow with ``__bucket``, ``__offset`` and
    ``__timestamp``; records before ``fetch_offset`` dropped (None when none is left).

    ``projection`` selects columns of a batch the server did not project (a remote segment holds
    batches as produced); ``out_schema`` is what the caller expects, and a batch that differs is an error.
    """
    header = rb.validate(buf, pos, where)
    skip = max(fetch_offset - header.base_offset, 0)
    count = header.record_count - skip
    if count <= 0:
        return header, None
    data = rb.decode_body(buf, pos, header)
    if projection:
        data = data.select(list(projection))
    if skip:
        data = data.slice(skip)
    columns = [*data.columns]
    columns.append(pa.repeat(pa.scalar(bucket, pa.int32()), count))
    columns.append(offsets_array(header.base_offset + skip, count))
    columns.append(pa.repeat(pa.scalar(header.commit_timestamp, pa.int64()), count))
    try:
        return header, pa.RecordBatch.from_arrays(columns, schema=out_schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as exc:
        raise SchemaMismatchError(f"{where}: batch at offset {header.base_offset} does not match {out_schema}: {exc}") from None


def decode_records(records: bytes, bucket: int, fetch_offset: int, out_schema: pa.Schema, where: str) -> pa.Table:
    """Every batch in ``records`` (already projected by the server), from ``fetch_offset`` on."""
    pieces: list[pa.RecordBatch] = []
    view = memoryview(records)
    pos = 0
    while pos < len(records):
        header, batch = decode_batch(view, pos, bucket, fetch_offset, out_schema, where)
        if batch is not None:
            pieces.append(batch)
        pos += header.size
    return pa.Table.from_batches(pieces, schema=out_schema)
