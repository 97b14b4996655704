"""The client's RPC edge: one channel per server, and every failure turned into a LakelogError."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import grpc

from lakelog.config import Configuration
from lakelog.rpc.channel import ChannelPool
from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceStub, TabletServiceStub
from lakelog.rpc.status import error_from_rpc

Response = TypeVar("Response")


class RpcClient:
    def __init__(self, bootstrap: str, conf: Configuration) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = conf.get("client.request-timeout") / 1000
        self._channels = ChannelPool(conf)

    def coordinator(self) -> CoordinatorServiceStub:
        return CoordinatorServiceStub(self._channels.get(self.bootstrap))

    def tablet(self, address: str) -> TabletServiceStub:
        return TabletServiceStub(self._channels.get(address))

    def call(self, method: Callable[..., Response], request: Any, target: str, timeout_s: float | None = None) -> Response:
        """A blocking call whose failure is raised as the lakelog error it carries."""
        try:
            return method(request, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc, target) from None

    def close(self) -> None:
        self._channels.close()
