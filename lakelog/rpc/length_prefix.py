"""The protobuf wire prefix of a length-delimited field, for messages serialized by hand.

Protobuf's Python runtime copies a bytes field each time its message is nested into another and
again in ``SerializeToString``; a message carrying record batches (a fetch answer, a produce
request) is instead written as its small fields serialized by protobuf, then each records field as
this prefix followed by the bytes, everything joined once. The wire format allows fields in any
order, so the result parses as the message itself.
"""

from __future__ import annotations

_LENGTH_DELIMITED = 2


def varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_size(value: int) -> int:
    """The bytes :func:`varint` writes for ``value``, without writing them."""
    return max(value.bit_length() + 6, 7) // 7


def length_prefix(field: int, length: int) -> bytes:
    """The tag and length that come before ``length`` bytes of field number ``field``."""
    return varint(field << 3 | _LENGTH_DELIMITED) + varint(length)


def length_prefix_size(field: int, length: int) -> int:
    """The bytes :func:`length_prefix` writes, without writing them."""
    return varint_size(field << 3 | _LENGTH_DELIMITED) + varint_size(length)
