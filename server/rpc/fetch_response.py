"""FetchLog answers serialized by hand, so that a bucket's record bytes are copied once.

Protobuf's Python runtime copies a bytes field each time its message is nested into another and
again in ``SerializeToString``: for a local fetch that was most of the server's time (bench/, the
local-tier benchmark). The wire format lets a message's fields come in any order and a
length-delimited field be written as a prefix followed by its bytes, so each level's small
metadata is serialized by protobuf and the records are appended after it, everything joined once.
The bytes are exactly a ``FetchLogResponse``; clients parse them with the generated class.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from lakelog.rpc import lakelog_api_pb2 as pb

_TABLES_FIELD = pb.FetchLogResponse.DESCRIPTOR.fields_by_name["tables_resp"].number
_BUCKETS_FIELD = pb.PbFetchLogRespForTable.DESCRIPTOR.fields_by_name["buckets_resp"].number
_RECORDS_FIELD = pb.PbFetchLogRespForBucket.DESCRIPTOR.fields_by_name["records"].number
_LENGTH_DELIMITED = 2


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _prefix(field: int, length: int) -> bytes:
    return _varint(field << 3 | _LENGTH_DELIMITED) + _varint(length)


def encode_fetch_response(buckets: Iterable[tuple[int, pb.PbFetchLogRespForBucket, bytes]]) -> bytes:
    """``(table id, bucket answer without records, records)`` per bucket, grouped by table in the
    order tables first appear."""
    by_table: dict[int, list[Sequence[bytes]]] = {}
    for table_id, answer, records in buckets:
        meta = answer.SerializeToString()
        parts = (meta, _prefix(_RECORDS_FIELD, len(records)), records) if records else (meta,)
        by_table.setdefault(table_id, []).append(parts)
    out: list[bytes] = []
    for table_id, answers in by_table.items():
        table = [pb.PbFetchLogRespForTable(table_id=table_id).SerializeToString()]
        for parts in answers:
            table.append(_prefix(_BUCKETS_FIELD, sum(len(part) for part in parts)))
            table.extend(parts)
        out.append(_prefix(_TABLES_FIELD, sum(len(part) for part in table)))
        out.extend(table)
    return b"".join(out)
