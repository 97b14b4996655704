"""A FetchLog answer read without copying its records: by the client, and by a follower copying
its leader's log.

Protobuf's Python runtime copies every ``bytes`` field it parses, and a fetch answer is mostly the
records of its buckets (up to ``client.scanner.fetch.max-bytes``, or a follower's fetch size). So
the answer is received as raw bytes and its outer levels are walked here: the small per-bucket
fields are handed to protobuf, and each bucket's records come back as a ``memoryview`` into the
received message, which the batch decoder reads in place and a follower appends as it is. Arrow
needs its buffers 8-byte aligned, and where a bucket's records sit in the message is up to the
framing: records that land misaligned are copied once, a plain memory copy per bucket (still a
small part of what protobuf's parse cost). The server writes the same wire format by hand
(:mod:`lakelog.server.rpc.fetch_response`); any field order protobuf allows is accepted here.
"""

from __future__ import annotations

import pyarrow as pa

from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.wire_fields import split_field, wire_fields

_TABLES = pb.FetchLogResponse.DESCRIPTOR.fields_by_name["tables_resp"].number
_TABLE_ID = pb.PbFetchLogRespForTable.DESCRIPTOR.fields_by_name["table_id"].number
_BUCKETS = pb.PbFetchLogRespForTable.DESCRIPTOR.fields_by_name["buckets_resp"].number
_RECORDS = pb.PbFetchLogRespForBucket.DESCRIPTOR.fields_by_name["records"].number
_WHAT = "fetch answer"


def parse_fetch_response(data: bytes | bytearray | memoryview) -> list[tuple[int, pb.PbFetchLogRespForBucket, memoryview]]:
    """``(table id, bucket answer without its records, records)`` per bucket, in wire order."""
    view = memoryview(data)
    answers = []
    for field, _, _, _, start, end in wire_fields(view, 0, len(view), _WHAT):
        if field != _TABLES:
            continue
        table_id = 0
        buckets = []
        for inner, _, inner_value, _, inner_start, inner_end in wire_fields(view, start, end, _WHAT):
            if inner == _TABLE_ID:
                table_id = inner_value
            elif inner == _BUCKETS:
                buckets.append(_bucket(view, inner_start, inner_end))
        answers.extend((table_id, answer, records) for answer, records in buckets)
    return answers


def _bucket(view: memoryview, start: int, end: int) -> tuple[pb.PbFetchLogRespForBucket, memoryview]:
    rest, records = split_field(view, start, end, _RECORDS, _WHAT)
    return pb.PbFetchLogRespForBucket.FromString(rest), _aligned(records[-1] if records else view[0:0])


def _aligned(records: memoryview) -> memoryview:
    if not records or pa.py_buffer(records).address % 8 == 0:
        return records
    aligned = memoryview(pa.allocate_buffer(len(records))).cast("B")  # Arrow allocates 64-byte aligned
    aligned[:] = records
    return aligned
