"""The record batch: lakelog's on-disk and on-wire unit.

A batch is a fixed header followed by an Arrow IPC stream (schema message + one record batch)::

    offset  size  field
    0       8     base_offset        int64   stamped by the tablet server at append
    8       4     length             int32   bytes after this field
    12      1     magic              int8    format version (1)
    13      8     commit_timestamp   int64   ms since epoch, stamped by the tablet server
    21      4     crc                uint32  CRC-32 of every byte after this field
    25      4     schema_id          int32
    29      2     attributes         int16   bit 0: columns were projected
    31      4     record_count       int32
    35      ...   body               Arrow IPC stream

As in Apache Fluss, the CRC starts after the fields the server stamps, so the producer computes it
once, the server checks it and stores the bytes as received, and every reader checks it again.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa

from lakelog.errors import CorruptRecordError

MAGIC = 1
HEADER = struct.Struct(">qibqIihi")
HEADER_SIZE = HEADER.size
LOG_OVERHEAD = 12
CRC_START = 25
TIMESTAMP_OFFSET = 13
ATTR_PROJECTED = 0x1
_BASE_OFFSET = struct.Struct(">q")
_TIMESTAMP = struct.Struct(">q")
# Given explicitly: without options pyarrow reads two environment variables per stream it opens.
_IPC_OPTIONS = pa.ipc.IpcWriteOptions()


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    length: int
    magic: int
    commit_timestamp: int
    crc: int
    schema_id: int
    attributes: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes, header included."""
        return LOG_OVERHEAD + self.length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count


def read_header(buf: bytes | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader(*HEADER.unpack_from(buf, pos))


def encode_batch(
    batch: pa.RecordBatch,
    schema_id: int,
    base_offset: int = 0,
    commit_timestamp: int = -1,
    attributes: int = 0,
) -> bytes:
    """Serialize an Arrow batch into a lakelog batch with a valid CRC."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=_IPC_OPTIONS) as writer:
        writer.write_batch(batch)
    body = sink.getvalue()
    tail = struct.pack(">ihi", schema_id, attributes, batch.num_rows)
    crc = zlib.crc32(body, zlib.crc32(tail))
    length = HEADER_SIZE - LOG_OVERHEAD + body.size
    head = HEADER.pack(base_offset, length, MAGIC, commit_timestamp, crc, schema_id, attributes, batch.num_rows)
    return head + body.to_pybytes()


def compute_crc(buf: bytes | memoryview, pos: int, header: BatchHeader) -> int:
    view = memoryview(buf)[pos + CRC_START : pos + header.size]
    return zlib.crc32(view)


def stamp(buf: bytearray, pos: int, base_offset: int, commit_timestamp: int) -> None:
    """Write the server-assigned fields in place; the CRC does not cover them."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)
    _TIMESTAMP.pack_into(buf, pos + TIMESTAMP_OFFSET, commit_timestamp)


def iter_headers(buf: bytes | memoryview, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Walk the complete batches in ``buf[pos:end]``; a trailing partial batch is not yielded."""
    end = len(buf) if end is None else end
    while pos + HEADER_SIZE <= end:
        header = read_header(buf, pos)
        if header.length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def validate(buf: bytes | memoryview, pos: int, where: str) -> BatchHeader:
    """Check one batch's header and CRC; ``where`` names the file or bucket for the error."""
    if pos + HEADER_SIZE > len(buf):
        raise CorruptRecordError(f"{where}: truncated batch header")
    header = read_header(buf, pos)
    if header.magic != MAGIC:
        raise CorruptRecordError(
            f"{where}: bad magic {header.magic} in batch at offset {header.base_offset}"
        )
    if header.length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > len(buf):
        raise CorruptRecordError(
            f"{where}: batch at offset {header.base_offset} has length {header.length} past the end"
        )
    if header.record_count <= 0:
        raise CorruptRecordError(
            f"{where}: batch at offset {header.base_offset} has record count {header.record_count}"
        )
    actual = compute_crc(buf, pos, header)
    if actual != header.crc:
        raise CorruptRecordError(
            f"{where}: CRC mismatch in batch at offset {header.base_offset}: "
            f"stored {header.crc:#010x}, computed {actual:#010x}"
        )
    return header


def decode_body(buf: bytes | memoryview, pos: int, header: BatchHeader) -> pa.RecordBatch:
    """The Arrow batch inside a lakelog batch (zero-copy over ``buf``)."""
    body = pa.py_buffer(memoryview(buf)[pos + HEADER_SIZE : pos + header.size])
    reader = pa.ipc.open_stream(body)
    batches = list(reader)
    if len(batches) != 1:
        raise CorruptRecordError(f"batch at offset {header.base_offset} holds {len(batches)} Arrow batches, not 1")
    return batches[0]


def decode_schema(buf: bytes | memoryview, pos: int, header: BatchHeader) -> pa.Schema:
    body = pa.py_buffer(memoryview(buf)[pos + HEADER_SIZE : pos + header.size])
    return pa.ipc.open_stream(body).schema
