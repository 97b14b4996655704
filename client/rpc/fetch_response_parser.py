"""A FetchLog answer read without copying its records.

Protobuf's Python runtime copies every ``bytes`` field it parses, and a fetch answer is mostly the
records of its buckets (up to ``client.scanner.fetch.max-bytes``). So the client receives the
answer as raw bytes and walks its outer levels itself: the small per-bucket fields are handed to
protobuf, and each bucket's records come back as a ``memoryview`` into the received message, which
the batch decoder reads in place. Arrow needs its buffers 8-byte aligned, and where a bucket's
records sit in the message is up to the framing: records that land misaligned are copied once, a
plain memory copy per bucket (still a small part of what protobuf's parse cost). The server writes the same wire format by hand
(:mod:`lakelog.server.rpc.fetch_response`); any field order protobuf allows is accepted here.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from lakelog.errors import CorruptRecordError
from lakelog.rpc import lakelog_api_pb2 as pb

_TABLES = pb.FetchLogResponse.DESCRIPTOR.fields_by_name["tables_resp"].number
_TABLE_ID = pb.PbFetchLogRespForTable.DESCRIPTOR.fields_by_name["table_id"].number
_BUCKETS = pb.PbFetchLogRespForTable.DESCRIPTOR.fields_by_name["buckets_resp"].number
_RECORDS = pb.PbFetchLogRespForBucket.DESCRIPTOR.fields_by_name["records"].number
_VARINT, _FIXED64, _LENGTH_DELIMITED, _FIXED32 = 0, 1, 2, 5


def parse_fetch_response(data: bytes) -> list[tuple[int, pb.PbFetchLogRespForBucket, memoryview]]:
    """``(table id, bucket answer without its records, records)`` per bucket, in wire order."""
    view = memoryview(data)
    answers = []
    for field, value, _, start, end in _fields(view, 0, len(view)):
        if field != _TABLES:
            continue
        table_id = 0
        buckets = []
        for inner, inner_value, _, inner_start, inner_end in _fields(view, start, end):
            if inner == _TABLE_ID:
                table_id = inner_value
            elif inner == _BUCKETS:
                buckets.append(_bucket(view, inner_start, inner_end))
        answers.extend((table_id, answer, records) for answer, records in buckets)
    return answers


def _bucket(view: memoryview, start: int, end: int) -> tuple[pb.PbFetchLogRespForBucket, memoryview]:
    rest = bytearray()
    records = view[0:0]
    for field, _, tag_start, value_start, value_end in _fields(view, start, end):
        if field == _RECORDS:
            records = _aligned(view[value_start:value_end])
        else:
            rest += view[tag_start:value_end]
    return pb.PbFetchLogRespForBucket.FromString(bytes(rest)), records


def _aligned(records: memoryview) -> memoryview:
    if not records or pa.py_buffer(records).address % 8 == 0:
        return records
    aligned = memoryview(pa.allocate_buffer(len(records))).cast("B")  # Arrow allocates 64-byte aligned
    aligned[:] = records
    return aligned


def _fields(view: memoryview, pos: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """``(field number, varint value or 0, tag start, value start, value end)`` of each field in
    ``view[pos:end]``; for a length-delimited field the value is ``view[value start:value end]``."""
    while pos < end:
        tag_start = pos
        tag, pos = _varint(view, pos, end)
        wire = tag & 7
        value = 0
        if wire == _VARINT:
            value_start = pos
            value, pos = _varint(view, pos, end)
        elif wire == _LENGTH_DELIMITED:
            length, value_start = _varint(view, pos, end)
            pos = value_start + length
        elif wire in (_FIXED64, _FIXED32):
            value_start = pos
            pos += 8 if wire == _FIXED64 else 4
        else:
            raise CorruptRecordError(f"fetch answer: wire type {wire} at byte {tag_start} is not protobuf")
        if pos > end:
            raise CorruptRecordError(f"fetch answer: field {tag >> 3} at byte {tag_start} runs past its message")
        yield tag >> 3, value, tag_start, value_start, pos


def _varint(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while pos < end:
        byte = view[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise CorruptRecordError(f"fetch answer: a varint runs past byte {end}")
