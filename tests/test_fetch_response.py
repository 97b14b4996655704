"""The hand-serialized FetchLog answer is exactly the protobuf message, and the client reads it in place."""

from __future__ import annotations

import pytest

from lakelog.client.rpc.fetch_response_parser import parse_fetch_response
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
    assert pb.FetchLogResponse.FromString(encode_fetch_response(answers)) == expected


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
        assert parsed[0][2].obj is data


def test_a_damaged_answer_is_a_clear_error() -> None:
    data = encode_fetch_response([(7, pb.PbFetchLogRespForBucket(bucket_id=0), b"x" * 100)])
    with pytest.raises(CorruptRecordError, match="fetch answer: field .* runs past its message"):
        parse_fetch_response(data[:-10])
