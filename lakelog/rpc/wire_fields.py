"""The protobuf wire format walked by hand, for the messages whose records must not be copied.

Protobuf's Python runtime copies every ``bytes`` field it parses, and again on each read of the
field: a fetch answer (on the client) and a produce request (on the server) are mostly records. Their
outer levels are walked here instead; each records field comes back as a place in the received
message, and the small fields around it are handed to protobuf, which checks them as usual.
"""

from __future__ import annotations

from typing import Iterator

from lakelog.errors import CorruptRecordError

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5


def wire_fields(view: memoryview, pos: int, end: int, what: str) -> Iterator[tuple[int, int, int, int, int, int]]:
    """``(field number, wire type, varint value or 0, tag start, value start, value end)`` of each
    field in ``view[pos:end]``; for a length-delimited field the value is ``view[value start:value end]``.
    ``what`` names the message in errors."""
    while pos < end:
        tag_start = pos
        tag, pos = _varint(view, pos, end, what)
        wire = tag & 7
        value = 0
        if wire == VARINT:
            value_start = pos
            value, pos = _varint(view, pos, end, what)
        elif wire == LENGTH_DELIMITED:
            length, value_start = _varint(view, pos, end, what)
            pos = value_start + length
        elif wire in (FIXED64, FIXED32):
            value_start = pos
            pos += 8 if wire == FIXED64 else 4
        else:
            raise CorruptRecordError(f"{what}: wire type {wire} at byte {tag_start} is not protobuf")
        if pos > end:
            raise CorruptRecordError(f"{what}: field {tag >> 3} at byte {tag_start} runs past its message")
        yield tag >> 3, wire, value, tag_start, value_start, pos


def split_field(view: memoryview, start: int, end: int, field: int, what: str) -> tuple[bytes, list[memoryview]]:
    """The message ``view[start:end]`` without its length-delimited field ``field`` (for protobuf
    to parse), and that field's values as views, in wire order (a repeated field's items; for a
    singular one protobuf keeps the last)."""
    rest = bytearray()
    values = []
    for number, wire, _, tag_start, value_start, value_end in wire_fields(view, start, end, what):
        if number == field and wire == LENGTH_DELIMITED:
            values.append(view[value_start:value_end])
        else:
            rest += view[tag_start:value_end]
    return bytes(rest), values


def _varint(view: memoryview, pos: int, end: int, what: str) -> tuple[int, int]:
    value = shift = 0
    while pos < end:
        byte = view[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise CorruptRecordError(f"{what}: a varint runs past byte {end}")
