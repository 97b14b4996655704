"""FetchLog answers serialized by hand, so that a bucket's record bytes are copied once, and land
where the client can decode them in place (and a follower append them as they are).

Protobuf's Python runtime copies a bytes field each time its message is nested into another and
again in ``SerializeToString``: for a local fetch that was most of the server's time (bench/, the
local-tier benchmark). The wire format lets a message's fields come in any order and a
length-delimited field be written as a prefix followed by its bytes, so each level's small
metadata is serialized by protobuf and the records are appended after it, everything joined once.

The client and a follower read each bucket's records as a view of the received message
(:mod:`lakelog.rpc.fetch_response_parser`), and Arrow wants its buffers 8-byte aligned:
batches are padded to 64 bytes, so it is enough that the records start at a multiple of 8 in the
message. A padding field the client does not know (protobuf skips it) goes before each bucket's
records to put them there. The bytes are exactly a ``FetchLogResponse``, unknown field included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.length_prefix import length_prefix as _prefix

_TABLES_FIELD = pb.FetchLogResponse.DESCRIPTOR.fields_by_name["tables_resp"].number
_BUCKETS_FIELD = pb.PbFetchLogRespForTable.DESCRIPTOR.fields_by_name["buckets_resp"].number
_RECORDS_FIELD = pb.PbFetchLogRespForBucket.DESCRIPTOR.fields_by_name["records"].number
# Reserved for this in the .proto: a field number no lakelog message will use.
PADDING_FIELD = 2047
RECORDS_ALIGNMENT = 8
# The padding field's two-byte tag and one-byte length: a padding is 0 or 3..10 bytes.
_PADDING_OVERHEAD = 3


def _padding(size: int) -> bytes:
    """An unknown length-delimited field of ``size`` bytes in all (0, or 3 to 10)."""
    return _prefix(PADDING_FIELD, size - _PADDING_OVERHEAD) + bytes(size - _PADDING_OVERHEAD) if size else b""


@dataclass
class _Bucket:
    meta: bytes
    records: bytes | bytearray | memoryview
    padding: int = 0

    def body(self) -> list[bytes]:
        if not self.records:
            return [self.meta]
        return [self.meta, _padding(self.padding), _prefix(_RECORDS_FIELD, len(self.records)), self.records]

    def size(self) -> int:
        return sum(len(part) for part in self.body())


def encode_fetch_response(buckets: Iterable[tuple[int, pb.PbFetchLogRespForBucket, bytes | bytearray | memoryview]]) -> bytes:
    """``(table id, bucket answer without records, records)`` per bucket, grouped by table in the
    order tables first appear."""
    by_table: dict[int, list[_Bucket]] = {}
    for table_id, answer, records in buckets:
        by_table.setdefault(table_id, []).append(_Bucket(answer.SerializeToString(), records))
    tables = [(pb.PbFetchLogRespForTable(table_id=table_id).SerializeToString(), answers) for table_id, answers in by_table.items()]
    # Padding changes sizes, and sizes the varints before it: a few passes settle every offset.
    while _place_records(tables):
        pass
    out: list[bytes] = []
    for meta, answers in tables:
        out.append(_prefix(_TABLES_FIELD, _table_size(meta, answers)))
        out.append(meta)
        for answer in answers:
            out.append(_prefix(_BUCKETS_FIELD, answer.size()))
            out.extend(answer.body())
    return b"".join(out)


def _table_size(meta: bytes, answers: list[_Bucket]) -> int:
    return len(meta) + sum(len(_prefix(_BUCKETS_FIELD, size)) + size for size in map(_Bucket.size, answers))


def _place_records(tables: list[tuple[bytes, list[_Bucket]]]) -> bool:
    """Set each bucket's padding so its records start on :data:`RECORDS_ALIGNMENT` with the
    sizes as they are now; True when any padding changed (and the layout must be checked again)."""
    changed = False
    position = 0
    for meta, answers in tables:
        position += len(_prefix(_TABLES_FIELD, _table_size(meta, answers))) + len(meta)
        for answer in answers:
            size = answer.size()
            position += len(_prefix(_BUCKETS_FIELD, size))
            if answer.records:
                start = position + len(answer.meta) + len(_prefix(_RECORDS_FIELD, len(answer.records)))
                needed = next(p for p in (0, *range(_PADDING_OVERHEAD, _PADDING_OVERHEAD + RECORDS_ALIGNMENT)) if (start + p) % RECORDS_ALIGNMENT == 0)
                if needed != answer.padding:
                    answer.padding, changed = needed, True
            position += size
    return changed
