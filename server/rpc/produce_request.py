"""A ProduceLog request read without copying its records.

Protobuf's Python runtime copies each bucket's records twice before the log would see them (the
parse, then each read of the field), and most of a produce request's time on the server is its
records' bytes. So the request's two levels are walked by hand
(:mod:`lakelog.rpc.wire_fields`), the small fields are parsed by protobuf, and each
bucket's records are a view of the received message, which the log writes as it is, behind the
headers it stamps (:meth:`~lakelog.server.log.log_tablet.LogTablet.append`).
"""

from __future__ import annotations

from dataclasses import dataclass

from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.wire_fields import split_field
from lakelog.server.rpc.error_boundary import MalformedRequest

_BUCKETS = pb.ProduceLogRequest.DESCRIPTOR.fields_by_name["buckets_req"].number
_RECORDS = pb.PbProduceLogReqForBucket.DESCRIPTOR.fields_by_name["records"].number
_WHAT = "produce request"


@dataclass(frozen=True)
class BucketRecords:
    partition_id: int
    bucket_id: int
    records: memoryview
    writer_token: bytes
    pipelined: bool = False


@dataclass(frozen=True)
class ProduceRequest:
    table_id: int
    hold_id: str
    buckets: list[BucketRecords]
    acks: int = -1  # -1: every in-sync replica; 1 or 0: the leader
    timeout_ms: int = 0


def parse_produce_request(data: bytes) -> ProduceRequest | MalformedRequest:
    """The request, or what is wrong with it (never raises: see :class:`MalformedRequest`)."""
    try:
        view = memoryview(data)
        rest, buckets = split_field(view, 0, len(view), _BUCKETS, _WHAT)
        request = pb.ProduceLogRequest.FromString(rest)
        buckets_records = [_bucket(bucket) for bucket in buckets]
        return ProduceRequest(request.table_id, request.hold_id, buckets_records, request.acks, request.timeout_ms)
    except Exception as exc:  # noqa: BLE001 - any parse failure (DecodeError, bad UTF-8, framing) is bad input
        return MalformedRequest(pb.ProduceLogRequest.__name__, f"{type(exc).__name__}: {exc}")


def _bucket(message: memoryview) -> BucketRecords:
    rest, records = split_field(message, 0, len(message), _RECORDS, _WHAT)
    bucket = pb.PbProduceLogReqForBucket.FromString(rest)
    return BucketRecords(bucket.partition_id, bucket.bucket_id, records[-1] if records else message[0:0], bucket.writer_token, bucket.pipelined)
