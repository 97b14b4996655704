"""The hand-serialized FetchLog answer is exactly the protobuf message clients parse."""

from __future__ import annotations

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
