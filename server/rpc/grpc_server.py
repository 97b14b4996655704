"""Building a gRPC server with lakelog's limits, server reflection (so grpcurl can list and call
every method), the standard ``grpc.health.v1.Health`` service (what Docker, Kubernetes and load
balancers probe) and, when configured, TLS and interceptors (token authentication).

The server is a ``grpc.aio`` server on an event loop of its own thread. Handlers written as plain
functions run in its pool of RPC threads, as they would in a threaded server; a coroutine handler
(FetchLog) runs on the loop, so a long poll waiting for data or for answer budget holds no thread
and control RPCs and produce keep their threads however many polls wait. Each connection may open at most
``server.rpc.max-concurrent-streams`` streams at once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent import futures
from typing import Any, Awaitable, Callable, Collection, Mapping, Sequence, TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from lakelog.errors import InvalidConfigError
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.channel import channel_options
from lakelog.server.rpc.error_boundary import lenient_parser

HEALTH_SERVICE = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name

T = TypeVar("T")

# How long a stopping server lets the calls it cancelled end by themselves before it ends them.
_UNWIND_S = 1.0


class _CancelledCalls(logging.Filter):
    """grpc.aio logs a call coroutine cancelled from outside as an unhandled ERROR with a
    traceback; a stopping server cancels on purpose the calls that do not end within ``_UNWIND_S``
    (see ``_stop``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


logging.getLogger("grpc._cython.cygrpc").addFilter(_CancelledCalls())


class _HandlerThreads(futures.ThreadPoolExecutor):
    """The RPC threads, counting the work they run: a stopping server keeps its loop running until
    the plain handlers in flight end, since a handler that answers or aborts after the loop closed
    leaves grpc's coroutine for it never awaited."""

    def __init__(self, threads: int) -> None:
        super().__init__(max_workers=threads, thread_name_prefix="rpc")
        self._busy = 0
        self._changed = threading.Condition()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> futures.Future[T]:
        with self._changed:
            self._busy += 1
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(self._ended)
        return future

    def _ended(self, _: futures.Future[Any]) -> None:
        with self._changed:
            self._busy -= 1
            self._changed.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._busy == 0, timeout_s)


class _Refused(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class _RefusalContext:
    """What a refusal handler of lakelog's interceptors touches of its context, kept to be replayed
    on the aio call's own context."""

    def __init__(self) -> None:
        self.trailing_metadata: Sequence[tuple[str, str]] = ()

    def set_trailing_metadata(self, metadata: Sequence[tuple[str, str]]) -> None:
        self.trailing_metadata = metadata

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise _Refused(code, details)


class _AsyncInterceptor(grpc.aio.ServerInterceptor):
    """One of lakelog's interceptors (they decide from the call's details alone, then keep the
    handler or put a refusal in its place) in front of the aio server. A refusal answers on the
    loop, whatever the method's kind (aio would run a plain streaming one there and block it)."""

    def __init__(self, inner: grpc.ServerInterceptor) -> None:
        self._inner = inner

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]], details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        chosen = self._inner.intercept_service(lambda _: handler, details)
        if chosen is None or chosen is handler:
            return chosen
        behavior = chosen.unary_unary or chosen.unary_stream or chosen.stream_unary or chosen.stream_stream

        async def refuse(request: Any, context: grpc.aio.ServicerContext) -> None:
            captured = _RefusalContext()
            try:
                behavior(request, captured)
            except _Refused as refused:
                context.set_trailing_metadata(captured.trailing_metadata)
                await context.abort(refused.code, refused.details)

        kind = next(k for k in ("unary_unary", "unary_stream", "stream_unary", "stream_stream") if getattr(chosen, k))
        return getattr(grpc, f"{kind}_rpc_method_handler")(refuse)


class RpcServer:
    """A ``grpc.aio`` server driven from threaded code: its event loop runs in thread ``rpc-loop``,
    its plain handlers (and ``run_in_executor(None, ...)`` of coroutine handlers) in ``threads``
    threads named ``rpc``."""

    def __init__(self, threads: int, options: Sequence[tuple[str, Any]], interceptors: Sequence[grpc.ServerInterceptor]) -> None:
        self._pool = _HandlerThreads(threads)
        self._loop = asyncio.new_event_loop()
        self._loop.set_default_executor(self._pool)
        self._thread = threading.Thread(target=self._loop.run_forever, name="rpc-loop", daemon=True)
        self._thread.start()
        self.aio = self._run(self._create(options, interceptors))

    async def _create(self, options: Sequence[tuple[str, Any]], interceptors: Sequence[grpc.ServerInterceptor]) -> grpc.aio.Server:
        return grpc.aio.server(
            migration_thread_pool=self._pool,
            options=list(options),
            interceptors=[_AsyncInterceptor(interceptor) for interceptor in interceptors],
        )

    def _run(self, coroutine: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()  # type: ignore[arg-type]

    async def _stop(self, grace_s: float | None) -> None:
        """Stop grpc, then let the calls' coroutines it cancelled unwind, and end those that do not
        (a closed loop would kill them mid-await). Cancelling them at once would cut grpc's own
        bookkeeping of each call short, which prints a CancelledError traceback per call."""
        await self.aio.stop(grace_s)
        left = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        if not left:
            return
        _, stuck = await asyncio.wait(left, timeout=_UNWIND_S)
        for task in stuck:
            task.cancel()
        await asyncio.gather(*stuck, return_exceptions=True)

    def add_port(self, address: str, credentials: grpc.ServerCredentials | None) -> int:
        """The port bound (0 when it could not be)."""
        try:
            return self.aio.add_secure_port(address, credentials) if credentials else self.aio.add_insecure_port(address)
        except RuntimeError:  # grpcio's "Failed to bind"
            return 0

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self.aio.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        self.aio.add_registered_method_handlers(service, handlers)

    def start(self) -> None:
        self._run(self.aio.start())

    def stop(self, grace_s: float | None) -> None:
        """Stop serving (calls in flight get ``grace_s``), then the loop and the threads."""
        if self._loop.is_closed():
            return
        self._run(self._stop(grace_s))
        self._pool.wait_idle(_UNWIND_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        self._pool.shutdown(wait=False)


def add_servicer(
    server: RpcServer,
    servicer: Any,
    service_name: str,
    serialized: Collection[str] = (),
    parsers: Mapping[str, Callable[[bytes], Any]] | None = None,
) -> None:
    """What the generated ``add_*Servicer_to_server`` does, from the proto's descriptor, except that
    requests that do not parse reach the handler's boundary (INVALID_ARGUMENT, not grpc's INTERNAL),
    the methods named in ``serialized`` answer bytes they serialized themselves (see
    :mod:`lakelog.server.rpc.fetch_response`) and those in ``parsers`` get their request parsed by
    it (see :mod:`lakelog.server.rpc.produce_request`)."""
    service = pb.DESCRIPTOR.services_by_name[service_name]
    handlers = {}
    for method in service.methods:
        request, response = (getattr(pb, message.name) for message in (method.input_type, method.output_type))
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            getattr(servicer, method.name),
            request_deserializer=(parsers or {}).get(method.name) or lenient_parser(request),
            response_serializer=bytes if method.name in serialized else response.SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)


def bind_server(
    host: str,
    port: int,
    threads: int,
    max_message_size: int,
    max_concurrent_streams: int,
    credentials: grpc.ServerCredentials | None = None,
    interceptors: Sequence[grpc.ServerInterceptor] = (),
) -> tuple[RpcServer, int]:
    """A server bound to its port (``port`` 0 picks a free one), not yet serving: bound first, so a
    port in use fails before the caller opens anything. Plaintext unless ``credentials`` are given."""
    options = [
        *channel_options(max_message_size),
        # grpcio sets SO_REUSEPORT by default: a second server would then share the port silently.
        ("grpc.so_reuseport", 0),
        ("grpc.max_concurrent_streams", max_concurrent_streams),
    ]
    server = RpcServer(threads, options, interceptors)
    address = f"{host}:{port}"
    bound = server.add_port(address, credentials)
    if bound == 0:
        server.stop(0)
        raise InvalidConfigError(f"cannot listen on {address}: the port is in use or not an address of this machine")
    return server, bound


def start_server(server: RpcServer, registrations: Sequence[Callable[[RpcServer], None]], service_names: Sequence[str]) -> None:
    """Register the services and reflection on a bound server and start it."""
    for register in registrations:
        register(server)
    names = [pb.DESCRIPTOR.services_by_name[name].full_name for name in service_names]
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server.aio)
    reflection.enable_server_reflection([*names, HEALTH_SERVICE, reflection.SERVICE_NAME], server.aio)
    server.start()
    for name in ("", *names):  # "": the server as a whole
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
