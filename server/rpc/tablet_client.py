"""The coordinator's outgoing calls to tablet servers (TLS and token from the server's own keys)."""

from __future__ import annotations

from typing import Sequence

from lakelog.config import Configuration
from lakelog.metadata import LakeOffsets, ServerNode, TableAssignment
from lakelog.rpc import codec
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.channel import ChannelPool
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceStub
from lakelog.server.rpc.cluster_secret import with_cluster_secret

NOTIFY_TIMEOUT_S = 10.0


class GrpcTabletNotifier:
    def __init__(self, conf: Configuration, cluster_secret: str | None) -> None:
        self._channels = ChannelPool(conf)
        self._secret = cluster_secret

    def _stub(self, node: ServerNode) -> TabletServiceStub:
        return TabletServiceStub(with_cluster_secret(self._channels.get(node.address), self._secret))

    def notify_leaders(self, node: ServerNode, tables: Sequence[TableAssignment], dropped: Sequence[int]) -> None:
        request = pb.NotifyLeaderAndIsrRequest(
            table_metadata=[codec.table_metadata_to_pb(t.info, t.leaders) for t in tables],
            dropped_table_id=list(dropped),
        )
        self._stub(node).NotifyLeaderAndIsr(request, timeout=NOTIFY_TIMEOUT_S)

    def notify_lake_offsets(self, node: ServerNode, offsets: Sequence[LakeOffsets]) -> None:
        request = codec.lake_offsets_to_pb(offsets)
        self._stub(node).NotifyLakeTableOffset(request, timeout=NOTIFY_TIMEOUT_S)

    def close(self) -> None:
        self._channels.close()
