"""A tablet server's outgoing calls to the coordinator (TLS and token from the server's own keys)."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import grpc

from lakelog.config import Configuration
from lakelog.errors import TableNotExistError
from lakelog.cluster_state import BucketReplicas, LakeOffsets, ServerNode, TableAssignment
from lakelog.rpc import codec
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.channel import open_channel
from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceStub
from lakelog.rpc.status import error_from_rpc
from lakelog.server.rpc.cluster_secret import with_cluster_secret

CALL_TIMEOUT_S = 10.0
Response = TypeVar("Response")


class CoordinatorClient:
    def __init__(self, address: str, conf: Configuration, cluster_secret: str | None) -> None:
        self.address = address
        self._channel = open_channel(address, conf)
        self._stub = CoordinatorServiceStub(with_cluster_secret(self._channel, cluster_secret))

    def _call(self, method: Callable[..., Response], request: Any) -> Response:
        try:
            return method(request, timeout=CALL_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc, f"coordinator {self.address}") from None

    def register(self, node: ServerNode) -> tuple[list[TableAssignment], list[LakeOffsets], bytes]:
        """The buckets this server leads, what of them is already in the lake and the key writer
        tokens are checked with."""
        response = self._call(self._stub.RegisterTabletServer, pb.RegisterTabletServerRequest(server=codec.node_to_pb(node)))
        assignments = [codec.table_metadata_from_pb(m) for m in response.table_metadata]
        return assignments, codec.lake_offsets_from_pb(response.lake_offsets), response.writer_key

    def heartbeat(self, server_id: int) -> None:
        self._call(self._stub.TabletServerHeartbeat, pb.TabletServerHeartbeatRequest(server_id=server_id))

    def table_assignment(self, table_id: int) -> TableAssignment:
        response = self._call(self._stub.GetMetadata, pb.MetadataRequest(table_id=[table_id]))
        if not response.table_metadata:
            raise TableNotExistError(f"table id {table_id} does not exist")
        return codec.table_metadata_from_pb(response.table_metadata[0])

    def tablet_servers(self) -> list[ServerNode]:
        response = self._call(self._stub.GetMetadata, pb.MetadataRequest())
        return [codec.node_from_pb(node) for node in response.tablet_servers]

    def adjust_isr(self, leader_id: int, physical_id: int, bucket: int, copies: BucketReplicas, isr: tuple[int, ...]) -> BucketReplicas:
        """Ask the coordinator to change a bucket's ISR from ``copies`` to ``isr``; what it keeps now."""
        request = pb.AdjustIsrRequest(
            leader_id=leader_id, table_id=physical_id, bucket_id=bucket, leader_epoch=copies.leader_epoch, isr_version=copies.isr_version, isr=isr
        )
        response = self._call(self._stub.AdjustIsr, request)
        found = codec.bucket_replicas_from_pb(response.bucket)
        if found is None:
            raise TableNotExistError(f"table or partition id {physical_id} has no bucket {bucket} with replicas")
        return found

    def close(self) -> None:
        self._channel.close()
