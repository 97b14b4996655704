"""The coordinator's outgoing calls to tablet servers (TLS and token from the server's own keys)."""

from __future__ import annotations

import logging
from typing import Iterable, Sequence

import grpc

from lakelog.config import Configuration
from lakelog.cluster_state import LakeOffsets, ServerNode, TableAssignment
from lakelog.metadata import BucketInfo
from lakelog.rpc import codec
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.channel import ChannelPool
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceStub
from lakelog.rpc.status import error_from_rpc
from lakelog.server.rpc.cluster_secret import with_cluster_secret

log = logging.getLogger(__name__)

NOTIFY_TIMEOUT_S = 10.0
# The status page asks on every refresh: a slow server must not hold the page for long.
DESCRIBE_TIMEOUT_S = 5.0


class GrpcTabletNotifier:
    def __init__(self, conf: Configuration, cluster_secret: str | None) -> None:
        self._channels = ChannelPool(conf)
        self._secret = cluster_secret

    def _stub(self, node: ServerNode) -> TabletServiceStub:
        return TabletServiceStub(with_cluster_secret(self._channels.get(node.address), self._secret))

    def notify_leaders(self, node: ServerNode, tables: Sequence[TableAssignment], dropped: Sequence[int]) -> None:
        """Raises the LakelogError the server answered (a ``StorageError``: it cannot open the
        buckets), or the transport's."""
        request = pb.NotifyLeaderAndIsrRequest(
            table_metadata=[codec.table_metadata_to_pb(t) for t in tables],
            dropped_table_id=list(dropped),
        )
        try:
            self._stub(node).NotifyLeaderAndIsr(request, timeout=NOTIFY_TIMEOUT_S)
        except grpc.RpcError as error:
            raise error_from_rpc(error, f"tablet server {node.server_id} at {node.address}") from None

    def notify_lake_offsets(self, node: ServerNode, offsets: Sequence[LakeOffsets]) -> None:
        request = codec.lake_offsets_to_pb(offsets)
        self._stub(node).NotifyLakeTableOffset(request, timeout=NOTIFY_TIMEOUT_S)

    def describe_buckets(self, node: ServerNode, table_id: int, buckets: Iterable[int], partition_id: int = 0) -> dict[int, BucketInfo]:
        """The buckets ``node`` described (of partition ``partition_id`` when set); one it answered
        with an error, or all when it could not be reached, are left out (the caller shows them as
        unavailable)."""
        request = pb.DescribeLogBucketsRequest(table_id=table_id, bucket_id=list(buckets), partition_id=partition_id)
        try:
            response = self._stub(node).DescribeLogBuckets(request, timeout=DESCRIBE_TIMEOUT_S)
        except grpc.RpcError as error:
            log.debug("tablet server %d at %s did not describe table %d: %s", node.server_id, node.address, table_id, error)
            return {}
        return {item.bucket_id: codec.bucket_info_from_pb(item) for item in response.buckets if not item.error_code}

    def close(self) -> None:
        self._channels.close()
