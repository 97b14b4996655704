"""An Arrow IPC record batch message read and written by hand, buffer places only.

Server-side projection moves a few columns' bytes out of a stored batch without reading the rest
(Apache Fluss's ``FileLogProjection`` does the same). For that it needs where each column's
buffers lie in the body, which only the message's flatbuffer metadata says and pyarrow does not
expose, and a new metadata for the columns kept. Both are small fixed shapes of Arrow's
``Message.fbs``::

    table Message     { version: short; header_type: ubyte; header: RecordBatch; bodyLength: long; custom_metadata }
    table RecordBatch { length: long; nodes: [FieldNode]; buffers: [Buffer]; compression; variadicBufferCounts }
    struct FieldNode  { length: long; null_count: long }
    struct Buffer     { offset: long; length: long }

A flatbuffer table starts with a signed offset back to its vtable, whose entries give each field's
place in the table (0: absent); references to tables and vectors are unsigned offsets forward.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from lakelog.errors import CorruptRecordError

_CONTINUATION = b"\xff\xff\xff\xff"
_PREFIX = struct.Struct("<4si")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_PAIR = struct.Struct("<qq")
_RECORD_BATCH = 3  # MessageHeader.RecordBatch
_V5 = 4  # MetadataVersion.V5
_FIELDS = 5  # fields of either table (Message, RecordBatch) this reads


@dataclass(frozen=True, slots=True)
class RecordBatchMessage:
    """What a record batch message says about its body: ``nodes`` are (length, null count) per
    array in depth-first field order, ``buffers`` (offset, length) in the body per buffer."""

    length: int
    nodes: list[tuple[int, int]]
    buffers: list[tuple[int, int]]
    body_length: int
    # Compressed buffers or variadic buffer counts (view types): not a layout moved as bytes here.
    plain: bool


def message_length(prefix: bytes | memoryview) -> int:
    """Bytes of the framed message starting with ``prefix`` (continuation marker, metadata length),
    body excluded."""
    marker, length = _PREFIX.unpack_from(prefix)
    if marker != _CONTINUATION or length <= 0 or length % 8:
        raise CorruptRecordError(f"an Arrow IPC message prefix {bytes(prefix[:8]).hex()} is not one this format writes")
    return _PREFIX.size + length


def read_record_batch_message(framed: bytes | memoryview) -> RecordBatchMessage:
    """The record batch message framed in ``framed`` (prefix and metadata, the body not needed)."""
    try:
        metadata = memoryview(framed)[_PREFIX.size : message_length(framed)]
        message = _Table(metadata, _U32.unpack_from(metadata)[0])
        if message.scalar(1, "<B") != _RECORD_BATCH:
            raise CorruptRecordError("the Arrow IPC message after the schema is not a record batch")
        batch = message.table(2)
        return RecordBatchMessage(
            length=batch.scalar(0, "<q"),
            nodes=batch.structs(1),
            buffers=batch.structs(2),
            body_length=message.scalar(3, "<q"),
            plain=not batch.present(3) and not batch.present(4),
        )
    except (struct.error, IndexError) as error:
        raise CorruptRecordError(f"an Arrow IPC record batch message cannot be read: {error}") from None


def write_record_batch_message(
    length: int, nodes: list[tuple[int, int]], buffers: list[tuple[int, int]], body_length: int
) -> bytes:
    """A framed record batch message (prefix and metadata; the body follows it) in the layout
    below, every scalar on its natural boundary, as the flatbuffer verifier Arrow runs checks::

        0   root offset -> 16         4   Message vtable (6 entries)
        16  Message table (24 bytes)  40  RecordBatch vtable (5 entries)
        56  RecordBatch table (24)    84  nodes vector, then the buffers vector
    """
    out = bytearray(84)
    _U32.pack_into(out, 0, 16)
    struct.pack_into("<6H", out, 4, 12, 24, 4, 6, 16, 8)
    _I32.pack_into(out, 16, 16 - 4)
    struct.pack_into("<hB", out, 20, _V5, _RECORD_BATCH)
    _I64.pack_into(out, 24, body_length)
    _U32.pack_into(out, 32, 56 - 32)
    struct.pack_into("<5H", out, 40, 10, 24, 8, 4, 16)
    _I32.pack_into(out, 56, 56 - 40)
    _I64.pack_into(out, 64, length)
    _U32.pack_into(out, 60, 84 - 60)
    out += _vector(nodes)
    buffers_at = len(out)
    out += _vector(buffers)
    _U32.pack_into(out, 72, buffers_at - 72)
    out += bytes(-len(out) % 8)
    return _PREFIX.pack(_CONTINUATION, len(out)) + bytes(out)


def _vector(items: list[tuple[int, int]]) -> bytes:
    """A vector of 16-byte structs placed at 4 mod 8, so its items sit on 8-byte boundaries; 4
    bytes of padding follow, keeping the next vector at 4 mod 8."""
    return _U32.pack(len(items)) + b"".join(_PAIR.pack(*item) for item in items) + bytes(4)


class _Table:
    """One flatbuffer table of ``buf`` at ``position``."""

    def __init__(self, buf: memoryview, position: int) -> None:
        self._buf = buf
        self._position = position
        vtable = position - _I32.unpack_from(buf, position)[0]
        size = _U16.unpack_from(buf, vtable)[0]
        self._fields = [_U16.unpack_from(buf, vtable + 4 + 2 * i)[0] if 4 + 2 * i < size else 0 for i in range(_FIELDS)]

    def present(self, field: int) -> bool:
        return self._fields[field] != 0

    def scalar(self, field: int, form: str) -> int:
        return struct.unpack_from(form, self._buf, self._position + self._fields[field])[0] if self._fields[field] else 0

    def _target(self, field: int) -> int:
        place = self._position + self._fields[field]
        return place + _U32.unpack_from(self._buf, place)[0]

    def table(self, field: int) -> _Table:
        if not self._fields[field]:
            raise CorruptRecordError("an Arrow IPC message has no header")
        return _Table(self._buf, self._target(field))

    def structs(self, field: int) -> list[tuple[int, int]]:
        if not self._fields[field]:
            return []
        at = self._target(field)
        count = _U32.unpack_from(self._buf, at)[0]
        if at + 4 + count * _PAIR.size > len(self._buf):
            raise CorruptRecordError(f"an Arrow IPC message's vector of {count} items runs past its metadata")
        return list(_PAIR.iter_unpack(self._buf[at + 4 : at + 4 + count * _PAIR.size]))
