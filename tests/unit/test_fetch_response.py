"""The hand-serialized FetchLog answer is exactly the protobuf message, and the client reads it in place."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakelog.rpc.fetch_response_parser import parse_fetch_response
from lakelog.errors import CorruptRecordError
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.server.rpc.fetch_response import encode_fetch_response


def test_the_answer_parses_as_the_message_protobuf_would_build() -> None:
    big = bytes(range(256)) * 1000  # a multi-byte length prefix
    answers = [
        (7, pb.PbFetchLogRespForBucket(bucket_id=0, high_watermark=5, log_start_offset=0), big),
        (9, pb.PbFetchLogRespForBucket(bucket_id=2, error_code=3, error_message="no such bucket"), b""),
        (
            7,
            pb.PbFetchLogRespForBucket(
                bucket_id=1,
                high_watermark=300,
                lake_log_fetch_info=pb.PbLakeLogFetchInfo(snapshot_id=42),
            ),
            b"",
        ),
        (7, pb.PbFetchLogRespForBucket(bucket_id=3, high_watermark=1), b"\x00\x01"),
    ]
    expected = pb.FetchLogResponse()
    for table_id in (7, 9):
        table = expected.tables_resp.add(table_id=table_id)
        for owner, answer, records in answers:
            if owner == table_id:
                bucket = table.buckets_resp.add()
                bucket.CopyFrom(answer)
                bucket.records = records
    parsed = pb.FetchLogResponse.FromString(encode_fetch_response(answers))
    parsed.DiscardUnknownFields()  # the padding that aligns the records
    assert parsed == expected


def test_no_buckets_is_an_empty_answer() -> None:
    assert encode_fetch_response([]) == b""


def test_the_client_reads_each_answer_and_takes_records_in_place() -> None:
    """Whether the server wrote the records last (by hand) or protobuf put them in field order, the
    client gets the same answers, and the records as a view of the received bytes, not a copy."""
    big = bytes(range(256)) * 1000
    by_hand = encode_fetch_response(
        [
            (7, pb.PbFetchLogRespForBucket(bucket_id=0, fetch_offset=11, high_watermark=5), big),
            (7, pb.PbFetchLogRespForBucket(bucket_id=1, error_code=3, error_message="gone"), b""),
            (9, pb.PbFetchLogRespForBucket(bucket_id=2, lake_log_fetch_info=pb.PbLakeLogFetchInfo(snapshot_id=42)), b"\x01"),
        ]
    )
    by_protobuf = pb.FetchLogResponse.FromString(by_hand).SerializeToString()
    for data in (by_hand, by_protobuf):
        parsed = parse_fetch_response(data)
        assert [(table, item.bucket_id, bytes(records)) for table, item, records in parsed] == [(7, 0, big), (7, 1, b""), (9, 2, b"\x01")]
        assert parsed[0][1].fetch_offset == 11 and parsed[0][1].high_watermark == 5 and not parsed[0][1].records
        assert parsed[1][1].error_message == "gone"
        assert parsed[2][1].lake_log_fetch_info.snapshot_id == 42


def test_records_are_taken_in_place_when_aligned_and_copied_once_when_not() -> None:
    """Arrow needs 8-byte aligned buffers: shifted by an unknown field of 0..7 more bytes, the same
    answer's records land at every alignment; each comes back aligned, a view where it could be."""
    big = bytes(range(256)) * 1000
    answer = encode_fetch_response([(7, pb.PbFetchLogRespForBucket(bucket_id=0), big)])
    views = copies = 0
    for extra in range(8):
        data = bytes([15 << 3 | 2, extra]) + bytes(extra) + answer  # field 15, unknown to the reader
        (table, item, records), = parse_fetch_response(data)
        assert (table, item.bucket_id, bytes(records)) == (7, 0, big)
        address = pa.py_buffer(records).address
        assert address % 8 == 0
        in_place = pa.py_buffer(data).address <= address < pa.py_buffer(data).address + len(data)
        views, copies = views + in_place, copies + (not in_place)
    assert views >= 1 and copies >= 1


def test_a_damaged_answer_is_a_clear_error() -> None:
    data = encode_fetch_response([(7, pb.PbFetchLogRespForBucket(bucket_id=0), b"x" * 100)])
    with pytest.raises(CorruptRecordError, match="fetch answer: field .* runs past its message"):
        parse_fetch_response(data[:-10])


def test_the_server_puts_every_bucket_records_on_an_8_byte_boundary() -> None:
    """Whatever the sizes of the fields before them, so the client decodes them where they arrived."""
    answers = [
        (table, pb.PbFetchLogRespForBucket(bucket_id=bucket, error_message="x" * (table * 7 + bucket), high_watermark=bucket << 20), bytes([bucket]) * (64 * (bucket + 1) + 130_000 * table))
        for table in (1, 2, 3)
        for bucket in range(5)
    ]
    data = encode_fetch_response(answers)
    assert pb.FetchLogResponse.FromString(data).tables_resp[2].buckets_resp[4].records == answers[-1][2]
    base = pa.py_buffer(data).address
    for (_, item, records), (_, sent, sent_records) in zip(parse_fetch_response(data), answers):
        assert (pa.py_buffer(records).address - base) % 8 == 0, "copied or misplaced"
        assert 0 <= pa.py_buffer(records).address - base < len(data)
        assert bytes(records) == sent_records and item.error_message == sent.error_message
