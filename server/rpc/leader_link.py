"""A follower's fetches from its leaders over gRPC (with the cluster secret: a fetch that names a
follower reads past the high watermark, which only cluster members may). A leader's answer names
its replica stream, which the follower's next fetches take
(:mod:`lakelog.server.rpc.replica_stream_link`).

A fetch's answer arrives as raw bytes and each bucket's records are a view of it
(:mod:`lakelog.rpc.fetch_response_parser`), appended as they are: protobuf's parse copied the
records twice, a large part of what copying a leader's log costs a follower."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Sequence

import grpc

from lakelog.config import Configuration
from lakelog.errors import error_from_code
from lakelog.cluster_state import ServerNode
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.channel import ChannelPool
from lakelog.rpc.fetch_response_parser import parse_fetch_response
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceStub
from lakelog.rpc.status import error_from_rpc
from lakelog.server.replica.replica_fetcher import FollowedBucket, FollowerFetch, LeaderAnswer
from lakelog.server.rpc.cluster_secret import with_cluster_secret
from lakelog.server.rpc.replica_stream_frames import REPLICA_STREAM_PORT_KEY

MAX_FETCH_BYTES = 16 << 20
MAX_BUCKET_BYTES = 4 << 20
CALL_TIMEOUT_S = 10.0
_FETCH_LOG = "/lakelog.rpc.TabletService/FetchLog"


def fetch_request(follower_id: int, fetches: Sequence[FollowerFetch], max_wait_ms: int) -> pb.FetchLogRequest:
    by_table: dict[int, list[FollowerFetch]] = defaultdict(list)
    for fetch in fetches:
        by_table[fetch.bucket.table_id].append(fetch)
    return pb.FetchLogRequest(
        follower_server_id=follower_id,
        max_bytes=MAX_FETCH_BYTES,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        tables_req=[
            pb.PbFetchLogReqForTable(
                table_id=table_id,
                buckets_req=[
                    pb.PbFetchLogReqForBucket(
                        partition_id=f.bucket.partition_id,
                        bucket_id=f.bucket.bucket,
                        fetch_offset=f.fetch_offset,
                        max_fetch_bytes=MAX_BUCKET_BYTES,
                        leader_epoch=f.bucket.leader_epoch,
                    )
                    for f in group
                ],
            )
            for table_id, group in by_table.items()
        ],
    )


def answers_of(answer: bytes | bytearray | memoryview, fetches: Sequence[FollowerFetch]) -> list[LeaderAnswer]:
    """A serialized FetchLogResponse as one answer per bucket fetched, records viewed in place."""
    physical = {(f.bucket.table_id, f.bucket.partition_id, f.bucket.bucket): f.bucket.key for f in fetches}
    answers = []
    for table_id, b, records in parse_fetch_response(answer):
        key = physical.get((table_id, b.partition_id, b.bucket_id))
        if key is None:
            continue
        error = error_from_code(b.error_code, b.error_message) if b.error_code else None
        answers.append(LeaderAnswer(key, records, b.high_watermark, b.log_start_offset, b.leader_epoch, b.starts_segment, error, b.writer_state))
    return answers


class GrpcLeaderLink:
    def __init__(self, conf: Configuration, cluster_secret: str | None) -> None:
        self._channels = ChannelPool(conf)
        self._secret = cluster_secret
        self._lock = threading.Lock()
        self._raw_fetches: dict[str, grpc.UnaryUnaryMultiCallable] = {}  # by leader address
        self._stream_ports: dict[str, int] = {}  # by leader address

    def fetch(
        self, leader: ServerNode, follower_id: int, fetches: Sequence[FollowerFetch], max_wait_ms: int, wake: threading.Event
    ) -> list[LeaderAnswer] | None:
        call = self._raw_fetch(leader).future(fetch_request(follower_id, fetches, max_wait_ms), timeout=max_wait_ms / 1000 + 10)
        cut_short = threading.Event()

        def arrived(_: grpc.Future) -> None:
            # A call cut short ends later, on a gRPC thread, when the fetcher may wait on its next
            # call: that end must not cut the next one short too.
            if not cut_short.is_set():
                wake.set()

        call.add_done_callback(arrived)
        wake.wait()
        if not call.done():
            cut_short.set()
            if call.cancel():
                return None
        try:
            answer = call.result()
        except grpc.RpcError as exc:
            raise error_from_rpc(exc, f"leader {leader.server_id} at {leader.address}") from None
        port = next((str(value) for key, value in call.trailing_metadata() or () if key == REPLICA_STREAM_PORT_KEY), "")
        with self._lock:
            self._stream_ports[leader.address] = int(port) if port.isdigit() else 0
        return answers_of(answer, fetches)

    def stream_port(self, leader: ServerNode) -> int:
        """The port of ``leader``'s replica stream, as its last answer over gRPC told (0: none known)."""
        with self._lock:
            return self._stream_ports.get(leader.address, 0)

    def end_offset_for_epoch(self, leader: ServerNode, bucket: FollowedBucket, epoch: int) -> tuple[int, int]:
        request = pb.OffsetForLeaderEpochRequest(table_id=bucket.physical_id, bucket_id=bucket.bucket, leader_epoch=epoch)
        try:
            response = self._stub(leader).OffsetForLeaderEpoch(request, timeout=CALL_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc, f"leader {leader.server_id} at {leader.address}") from None
        return response.leader_epoch, response.end_offset

    def done(self) -> None:
        """Nothing to let go: the channels are shared by every fetcher."""

    def _raw_fetch(self, leader: ServerNode) -> grpc.UnaryUnaryMultiCallable:
        """FetchLog to ``leader`` answering raw bytes, made once per address (a fetcher calls it
        again as soon as an answer is appended)."""
        with self._lock:
            call = self._raw_fetches.get(leader.address)
            if call is None:
                channel = with_cluster_secret(self._channels.get(leader.address), self._secret)
                call = channel.unary_unary(_FETCH_LOG, request_serializer=pb.FetchLogRequest.SerializeToString)
                self._raw_fetches[leader.address] = call
            return call

    def _stub(self, leader: ServerNode) -> TabletServiceStub:
        return TabletServiceStub(with_cluster_secret(self._channels.get(leader.address), self._secret))

    def close(self) -> None:
        self._channels.close()
