"""TabletService as the client calls it: one method per RPC, lakelog dataclasses in and out.

ProduceLog and FetchLog are sent without blocking (the writer and the fetcher keep several in
flight); their answers come back through a callback, already converted.
"""

from __future__ import annotations

from typing import Callable, Sequence

import grpc

from lakelog.errors import LakelogError, error_from_code
from lakelog.cluster_state import ServerNode
from lakelog.metadata import BucketInfo, OffsetSpec
from lakelog.rpc import codec
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.length_prefix import length_prefix
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceStub
from lakelog.rpc.rpc_edge import RpcEdge
from lakelog.rpc.fetch_response_parser import parse_fetch_response
from lakelog.client.table_bucket import TableBucket
from lakelog.client.rpc.messages import BucketRepair, FetchedBucket, FetchRequest, ListedOffset, ProducedBatch, ProduceRequest


_FETCH_LOG = "/lakelog.rpc.TabletService/FetchLog"
_PRODUCE_LOG = "/lakelog.rpc.TabletService/ProduceLog"
_BUCKETS_FIELD = pb.ProduceLogRequest.DESCRIPTOR.fields_by_name["buckets_req"].number
_RECORDS_FIELD = pb.PbProduceLogReqForBucket.DESCRIPTOR.fields_by_name["records"].number
# Rebuilding a manifest lists and reads every segment index of a bucket in remote storage.
REPAIR_TIMEOUT_S = 120.0


def _raw_fetch_log(channel: grpc.Channel) -> grpc.UnaryUnaryMultiCallable:
    """FetchLog whose answer arrives as raw bytes (no response deserializer), for parse_fetch_response."""
    return channel.unary_unary(_FETCH_LOG, request_serializer=pb.FetchLogRequest.SerializeToString)


def _raw_produce_log(channel: grpc.Channel) -> grpc.UnaryUnaryMultiCallable:
    """ProduceLog whose request is sent as the bytes :func:`encode_produce_request` made."""
    return channel.unary_unary(_PRODUCE_LOG, response_deserializer=pb.ProduceLogResponse.FromString)


def encode_produce_request(produce: ProduceRequest) -> bytes:
    """``produce`` as a serialized ``ProduceLogRequest`` whose record batches are copied once
    (see :mod:`lakelog.rpc.length_prefix`): building it with protobuf copied them three times,
    most of the writer's time per request."""
    head = pb.ProduceLogRequest(acks=produce.acks, table_id=produce.table_id, timeout_ms=produce.timeout_ms, hold_id=produce.hold_id)
    parts: list[bytes | memoryview] = [head.SerializeToString()]
    for item in produce.buckets:
        bucket = pb.PbProduceLogReqForBucket(
            partition_id=item.partition_id, bucket_id=item.bucket, writer_token=produce.writer_token, pipelined=item.pipelined
        ).SerializeToString()
        size = sum(len(batch) for batch in item.batches)
        records = length_prefix(_RECORDS_FIELD, size)
        parts += [length_prefix(_BUCKETS_FIELD, len(bucket) + len(records) + size), bucket, records, *item.batches]
    return b"".join(parts)


def _target(node: ServerNode) -> str:
    return f"tablet server {node.address}"


def _raise_bucket_error(item: pb.PbLogBucketInfo) -> None:
    if item.error_code:
        raise error_from_code(item.error_code, item.error_message)


def _produced(response: pb.ProduceLogResponse) -> list[ProducedBatch | LakelogError]:
    """Per bucket of the request, in its order (the server answers every bucket, in order)."""
    return [
        error_from_code(item.error_code, item.error_message)
        if item.error_code
        else ProducedBatch(item.bucket_id, item.base_offset, item.commit_timestamp)
        for item in response.buckets_resp
    ]


def _fetched(enable_lake: bool) -> Callable[[bytes], list[FetchedBucket]]:
    def convert(response: bytes) -> list[FetchedBucket]:
        answers = []
        for table_id, item, records in parse_fetch_response(response):
            error = error_from_code(item.error_code, item.error_message) if item.error_code else None
            answers.append(
                FetchedBucket(
                    TableBucket(table_id, item.partition_id or None, item.bucket_id),
                    item.fetch_offset,
                    records,
                    item.high_watermark,
                    item.log_start_offset,
                    error,
                    None if error else codec.remote_fetch_info_from_pb(item),
                    None if error or not enable_lake else codec.lake_fetch_info_from_pb(item),
                )
            )
        return answers

    return convert


class TabletGateway:
    def __init__(self, edge: RpcEdge) -> None:
        self._edge = edge

    @property
    def timeout_s(self) -> float:
        return self._edge.timeout_s

    @property
    def closed(self) -> bool:
        """The connection is closed: every request fails at once."""
        return self._edge.closed

    def _stub(self, node: ServerNode) -> TabletServiceStub:
        return self._edge.stub(node.address, TabletServiceStub)

    def produce_log(
        self, node: ServerNode, produce: ProduceRequest, on_done: Callable[[list[ProducedBatch | LakelogError] | LakelogError], None]
    ) -> None:
        """``on_done`` gets one answer per bucket of ``produce``, in its order, or the error that failed the whole request."""
        timeout_s = produce.timeout_ms / 1000
        produce_log = self._edge.stub(node.address, _raw_produce_log)
        self._edge.call_async(produce_log, encode_produce_request(produce), _target(node), timeout_s, _produced, on_done)

    def fetch_log(self, node: ServerNode, fetch: FetchRequest, on_done: Callable[[list[FetchedBucket] | LakelogError], None]) -> None:
        """The server may hold the fetch ``max_wait_ms`` before it answers, so the deadline is longer by that."""
        request = pb.FetchLogRequest(
            follower_server_id=-1,
            max_bytes=fetch.max_bytes,
            max_wait_ms=fetch.max_wait_ms,
            min_bytes=fetch.min_bytes,
            enable_lake=fetch.enable_lake,
            tables_req=[
                pb.PbFetchLogReqForTable(
                    table_id=fetch.table_id,
                    projected_fields=list(fetch.projection),
                    buckets_req=[
                        pb.PbFetchLogReqForBucket(
                            partition_id=b.partition_id or 0, bucket_id=b.bucket, fetch_offset=o, max_fetch_bytes=fetch.bucket_max_bytes
                        )
                        for b, o in fetch.buckets
                    ],
                )
            ],
        )
        timeout_s = self._edge.timeout_s + fetch.max_wait_ms / 1000
        fetch_log = self._edge.stub(node.address, _raw_fetch_log)
        self._edge.call_async(fetch_log, request, _target(node), timeout_s, _fetched(fetch.enable_lake), on_done)

    def list_offsets(
        self, node: ServerNode, table_id: int, partitions: Sequence[tuple[int, list[int]]], spec: OffsetSpec, enable_lake: bool
    ) -> list[ListedOffset]:
        """Offsets of ``(partition id, buckets)`` pairs of one table (partition id 0: the table's own
        buckets) in one request: the first pair as the request's own, the others as
        ``partitions_req``. A bucket's error comes back in its answer, for the caller to weigh."""
        (partition_id, buckets), *more = partitions
        request = pb.ListOffsetsRequest(
            follower_server_id=-1,
            offset_type=int(spec.type),
            table_id=table_id,
            partition_id=partition_id,
            bucket_id=buckets,
            start_timestamp=spec.ms,
            enable_lake=enable_lake,
            partitions_req=[pb.PbListOffsetsReqForPartition(partition_id=p, bucket_id=b) for p, b in more],
        )
        return [
            ListedOffset(
                item.bucket_id,
                item.offset,
                item.lake_snapshot_id,
                item.partition_id or partition_id,
                error_from_code(item.error_code, item.error_message) if item.error_code else None,
            )
            for item in self._edge.call(self._stub(node).ListOffsets, request, _target(node)).buckets_resp
        ]

    def describe_log_buckets(
        self, node: ServerNode, table_id: int, buckets: list[int], partition_id: int = 0
    ) -> list[tuple[int, BucketInfo]]:
        request = pb.DescribeLogBucketsRequest(table_id=table_id, bucket_id=buckets, partition_id=partition_id)
        described = []
        for item in self._edge.call(self._stub(node).DescribeLogBuckets, request, _target(node)).buckets:
            _raise_bucket_error(item)
            described.append((item.bucket_id, codec.bucket_info_from_pb(item)))
        return described

    def repair_log(self, node: ServerNode, table_id: int, buckets: list[int], local: bool, accept_truncation: bool) -> list[BucketRepair]:
        """``local``: lift a bucket's fence (with ``accept_truncation``); else rebuild its remote manifest."""
        request = pb.RepairLogRequest(
            table_id=table_id,
            bucket_id=buckets,
            tier=pb.REPAIR_LOCAL if local else pb.REPAIR_REMOTE,
            accept_truncation=accept_truncation,
        )
        response = self._edge.call(self._stub(node).RepairLog, request, _target(node), REPAIR_TIMEOUT_S)
        return [
            BucketRepair(item.bucket_id, item.summary, error_from_code(item.error_code, item.error_message) if item.error_code else None)
            for item in response.buckets
        ]

    def get_server_time(self, node: ServerNode) -> int:
        return self._edge.call(self._stub(node).GetServerTime, pb.GetServerTimeRequest(), _target(node)).server_time_ms

    def open_barrier_hold(self, node: ServerNode, hold_id: str, timeout_ms: int, start_ms: int) -> int:
        """The hold's start on this server: ``start_ms``, or the server's clock when that is 0."""
        request = pb.OpenBarrierHoldRequest(hold_id=hold_id, timeout_ms=timeout_ms, start_ms=start_ms)
        return self._edge.call(self._stub(node).OpenBarrierHold, request, _target(node)).start_ms

    def close_barrier_hold(self, node: ServerNode, hold_id: str, release_after_ms: int) -> None:
        request = pb.CloseBarrierHoldRequest(hold_id=hold_id, release_after_ms=release_after_ms)
        self._edge.call(self._stub(node).CloseBarrierHold, request, _target(node))
