"""The client's RPC edge: one channel per server, and every failure turned into a LakelogError."""

from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

import grpc

from lakelog.config import Configuration
from lakelog.errors import LakelogError
from lakelog.rpc.channel import open_channel
from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceStub, TabletServiceStub
from lakelog.rpc.status import error_from_rpc

Response = TypeVar("Response")


class RpcClient:
    def __init__(self, bootstrap: str, conf: Configuration) -> None:
        self.bootstrap = bootstrap
        self._conf = conf
        self.timeout_s = conf.get("client.request-timeout") / 1000
        size = conf.get("rpc.max-message-size")
        self._options = [("grpc.max_send_message_length", size), ("grpc.max_receive_message_length", size)]
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _channel(self, address: str) -> grpc.Channel:
        with self._lock:
            if self._closed:
                raise LakelogError("the connection is closed")
            channel = self._channels.get(address)
            if channel is None:
                channel = self._channels[address] = open_channel(address, self._conf, self._options)
            return channel

    def coordinator(self) -> CoordinatorServiceStub:
        return CoordinatorServiceStub(self._channel(self.bootstrap))

    def tablet(self, address: str) -> TabletServiceStub:
        return TabletServiceStub(self._channel(address))

    def call(self, method: Callable[..., Response], request: Any, target: str, timeout_s: float | None = None) -> Response:
        """A blocking call whose failure is raised as the lakelog error it carries."""
        try:
            return method(request, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc, target) from None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()
