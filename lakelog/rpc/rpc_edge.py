"""Channels, deadlines and error mapping for a caller of lakelog servers: every call raises the
lakelog error it carries, whichever server it reached and however it failed."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import grpc

from lakelog.config import Configuration
from lakelog.errors import LakelogError
from lakelog.rpc.channel import ChannelPool
from lakelog.rpc.status import error_from_rpc

Response = TypeVar("Response")
Result = TypeVar("Result")
Stub = TypeVar("Stub")


class RpcEdge:
    def __init__(self, conf: Configuration) -> None:
        self.timeout_s = conf.get("client.request-timeout") / 1000
        self._plaintext = not conf.get("security.tls.enabled")
        self._channels = ChannelPool(conf)
        self._stubs: dict[tuple[str, Callable[[grpc.Channel], Any]], Any] = {}

    def stub(self, address: str, make: Callable[[grpc.Channel], Stub]) -> Stub:
        """``make(channel)`` for ``address``, built once: a stub builds a callable per RPC, too
        much to repeat on every produce and fetch."""
        key = (address, make)
        stub = self._stubs.get(key)
        if stub is None:
            stub = self._stubs[key] = make(self._channels.get(address))
        return stub

    def call(self, method: Callable[..., Response], request: Any, target: str, timeout_s: float | None = None) -> Response:
        """A blocking call whose failure is raised as the lakelog error it carries."""
        try:
            return method(request, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc, target, self._plaintext) from None

    def call_async(
        self,
        method: Any,
        request: Any,
        target: str,
        timeout_s: float,
        convert: Callable[[Any], Result],
        on_done: Callable[[Result | LakelogError], None],
    ) -> None:
        """Send without blocking; ``on_done`` gets the converted answer or the error (on a gRPC
        thread, so it must not block)."""

        def done(future: grpc.Future) -> None:
            try:
                response = future.result()
            except grpc.RpcError as exc:
                on_done(error_from_rpc(exc, target, self._plaintext))
                return
            try:
                result: Result | LakelogError = convert(response)
            except LakelogError as error:
                result = error
            on_done(result)

        method.future(request, timeout=timeout_s).add_done_callback(done)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called: nothing can be sent any more."""
        return self._channels.closed

    def close(self) -> None:
        self._stubs.clear()
        self._channels.close()
