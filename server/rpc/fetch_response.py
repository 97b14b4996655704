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

from dataclasses import dataclass, field
from typing import Iterable

from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.length_prefix import length_prefix as _prefix, length_prefix_size as _prefix_size

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


def _padding_to_align(start: int) -> int:
    """The padding (0, or 3 to 10 bytes) that moves ``start`` onto :data:`RECORDS_ALIGNMENT`."""
    short = -start % RECORDS_ALIGNMENT
    return short if short == 0 or short >= _PADDING_OVERHEAD else short + RECORDS_ALIGNMENT


@dataclass(slots=True)
class _Bucket:
    """One bucket's answer, sized in integers: placing the records runs over every bucket a few
    times per answer, so nothing is serialized until the layout is settled."""

    meta: bytes
    records: bytes | bytearray | memoryview
    records_prefix: bytes = field(init=False, default=b"")
    padding: int = 0

    def __post_init__(self) -> None:
        if self.records:
            self.records_prefix = _prefix(_RECORDS_FIELD, len(self.records))

    def size(self) -> int:
        return len(self.meta) + self.padding + len(self.records_prefix) + len(self.records)

    def body(self) -> list[bytes | bytearray | memoryview]:
        if not self.records:
            return [self.meta]
        return [self.meta, _padding(self.padding), self.records_prefix, self.records]


@dataclass(slots=True)
class _Table:
    meta: bytes
    answers: list[_Bucket]

    def size(self) -> int:
        return len(self.meta) + sum(_prefix_size(_BUCKETS_FIELD, size) + size for size in map(_Bucket.size, self.answers))


def encode_fetch_response(buckets: Iterable[tuple[int, pb.PbFetchLogRespForBucket, bytes | bytearray | memoryview]]) -> bytes:
    """``(table id, bucket answer without records, records)`` per bucket, grouped by table in the
    order tables first appear."""
    by_table: dict[int, list[_Bucket]] = {}
    for table_id, answer, records in buckets:
        by_table.setdefault(table_id, []).append(_Bucket(answer.SerializeToString(), records))
    tables = [_Table(pb.PbFetchLogRespForTable(table_id=table_id).SerializeToString(), answers) for table_id, answers in by_table.items()]
    # Padding changes sizes, and sizes the varints before it: a few passes settle every offset.
    while _place_records(tables):
        pass
    out: list[bytes | bytearray | memoryview] = []
    for table in tables:
        out.append(_prefix(_TABLES_FIELD, table.size()))
        out.append(table.meta)
        for answer in table.answers:
            out.append(_prefix(_BUCKETS_FIELD, answer.size()))
            out.extend(answer.body())
    return b"".join(out)


def _place_records(tables: list[_Table]) -> bool:
    """Set each bucket's padding so its records start on :data:`RECORDS_ALIGNMENT` with the
    sizes as they are now; True when any padding changed (and the layout must be checked again)."""
    changed = False
    position = 0
    for table in tables:
        position += _prefix_size(_TABLES_FIELD, table.size()) + len(table.meta)
        for answer in table.answers:
            position += _prefix_size(_BUCKETS_FIELD, answer.size())
            if answer.records:
                needed = _padding_to_align(position + len(answer.meta) + len(answer.records_prefix))
                if needed != answer.padding:
                    answer.padding, changed = needed, True
            position += answer.size()
    return changed
