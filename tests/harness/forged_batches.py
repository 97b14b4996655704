"""Batches as a hostile or buggy producer makes them: header fields that lie under a valid CRC."""

from __future__ import annotations

import struct
from dataclasses import astuple, replace

import pyarrow as pa

from lakelog.record import batch as rb


def lie(data: bytes, **fields: int) -> bytes:
    """``data`` with header fields changed and its CRC computed again: a lie no CRC check sees."""
    out = bytearray(data)
    rb.HEADER.pack_into(out, 0, *astuple(replace(rb.read_header(data), **fields)))
    struct.pack_into(">I", out, rb.CRC_START - 4, rb.crc32c(memoryview(out)[rb.CRC_START :]))
    return bytes(out)


def several_batches_in_one_body(batches: list[pa.RecordBatch], schema_id: int = 1) -> bytes:
    """One lakelog batch whose body is an IPC stream of all ``batches``, its header counting every row."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batches[0].schema) as stream:
        for batch in batches:
            stream.write_batch(batch)
    body = sink.getvalue().to_pybytes()
    size = rb.HEADER_SIZE + len(body)
    out = bytearray(size + -size % rb.ALIGNMENT)
    out[rb.HEADER_SIZE : size] = body
    rb.seal(memoryview(out), 0, -1, schema_id, 0, sum(batch.num_rows for batch in batches), len(body))
    return bytes(out)
