"""Turning the bytes of a fetched bucket into an Arrow table with lakelog's own columns.

Every batch is checked against its CRC here, on the reader's side, whichever tier served it.
"""

from __future__ import annotations

from array import array

import pyarrow as pa

from lakelog.record import batch as rb

from lakelog.client.scanner.scan_records import with_meta_fields


def offsets_array(start: int, count: int) -> pa.Array:
    buffer = pa.py_buffer(array("q", range(start, start + count)))
    return pa.Array.from_buffers(pa.int64(), count, [None, buffer])


def decode_records(records: bytes, bucket: int, fetch_offset: int, schema: pa.Schema, where: str) -> pa.Table:
    """Records at or after ``fetch_offset``, with ``__bucket``, ``__offset`` and ``__timestamp``.

    ``schema`` is the projected schema the caller expects; a batch whose columns differ is an error.
    """
    out_schema = with_meta_fields(schema)
    pieces: list[pa.RecordBatch] = []
    view = memoryview(records)
    pos = 0
    while pos < len(records):
        header = rb.validate(view, pos, where)
        data = rb.decode_body(view, pos, header)
        skip = max(fetch_offset - header.base_offset, 0)
        count = header.record_count - skip
        if count > 0:
            if skip:
                data = data.slice(skip)
            columns = [*data.columns]
            columns.append(pa.repeat(pa.scalar(bucket, pa.int32()), count))
            columns.append(offsets_array(header.base_offset + skip, count))
            columns.append(pa.repeat(pa.scalar(header.commit_timestamp, pa.int64()), count))
            pieces.append(pa.RecordBatch.from_arrays(columns, schema=out_schema))
        pos += header.size
    return pa.Table.from_batches(pieces, schema=out_schema)
