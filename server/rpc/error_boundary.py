"""The one place where server-side errors become gRPC statuses.

Every handler is wrapped: a LakelogError becomes its status code, its message and its lakelog code
in trailing metadata; anything else is logged with its traceback and answered INTERNAL, so one bad
request never takes the server down. Every handler passes here, so here it is timed and its
failures counted, in the ``metrics`` of the service it belongs to.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from typing import Any, Callable, Protocol, TypeVar

import grpc

from google.protobuf.message import Message

from lakelog.errors import InvalidRequestError, LakelogError, UnknownServerError
from lakelog.rpc.status import ERROR_CODE_KEY, status_code
from lakelog.server.metrics.server_metrics import ServerMetrics

log = logging.getLogger(__name__)

Handler = TypeVar("Handler", bound=Callable[..., Any])


class InstrumentedService(Protocol):
    """A servicer whose handlers are timed and counted in its ``metrics``."""

    metrics: ServerMetrics


class MalformedRequest:
    """What a request that does not parse as its message deserializes to: grpc would answer INTERNAL
    before any handler ran; :func:`rpc_method` answers INVALID_ARGUMENT naming the method instead."""

    def __init__(self, message_name: str, reason: str) -> None:
        self.message_name = message_name
        self.reason = reason


def lenient_parser(message_type: type[Message]) -> Callable[[bytes], Message | MalformedRequest]:
    """A request deserializer that never raises: bytes that are not a ``message_type`` become a
    :class:`MalformedRequest` for the handler's boundary to refuse."""

    def parse(data: bytes) -> Message | MalformedRequest:
        try:
            return message_type.FromString(data)
        except Exception as exc:  # noqa: BLE001 - any parse failure (DecodeError, bad UTF-8, depth) is bad input
            return MalformedRequest(message_type.__name__, f"{type(exc).__name__}: {exc}")

    return parse


def rpc_method(handler: Handler) -> Handler:
    """The boundary around one handler, a plain function or a coroutine (one that waits on the
    RPC event loop, see :mod:`grpc_server`)."""
    method = handler.__name__
    if inspect.iscoroutinefunction(handler):
        return _async_rpc_method(handler, method)

    @functools.wraps(handler)
    def wrapper(self: InstrumentedService, request: Any, context: grpc.ServicerContext) -> Any:
        started = time.perf_counter()
        try:
            return handler(self, _parsed(request, method), context)
        except Exception as exc:  # noqa: BLE001 - the boundary: report, never crash the server
            abort(context, _as_lakelog_error(exc, method), self.metrics, method)
        finally:
            self.metrics.observe_rpc(method, time.perf_counter() - started)

    return wrapper  # type: ignore[return-value]


def _async_rpc_method(handler: Handler, method: str) -> Handler:
    @functools.wraps(handler)
    async def wrapper(self: InstrumentedService, request: Any, context: grpc.aio.ServicerContext) -> Any:
        started = time.perf_counter()
        observed = False
        try:
            return await handler(self, _parsed(request, method), context)
        except Exception as exc:  # noqa: BLE001 - the boundary: report, never crash the server
            error = _as_lakelog_error(exc, method)
            status = _count_and_mark(context, error, self.metrics, method)
            # Before the abort: grpc.aio sends the status from inside it, and the caller may read the metrics next.
            self.metrics.observe_rpc(method, time.perf_counter() - started)
            observed = True
            await context.abort(status, error.message)
        finally:
            if not observed:
                self.metrics.observe_rpc(method, time.perf_counter() - started)

    return wrapper  # type: ignore[return-value]


def _parsed(request: Any, method: str) -> Any:
    if isinstance(request, MalformedRequest):
        raise InvalidRequestError(f"{method}: the request is not a valid {request.message_name} ({request.reason})")
    return request


def _as_lakelog_error(exc: Exception, method: str) -> LakelogError:
    if isinstance(exc, LakelogError):
        return exc
    log.error("%s failed unexpectedly", method, exc_info=exc)
    return UnknownServerError(f"{method} failed: {type(exc).__name__}: {exc}")


def _count_and_mark(context: Any, error: LakelogError, metrics: ServerMetrics, method: str) -> grpc.StatusCode:
    status = status_code(error)
    metrics.count_error(method, error, status.name)
    context.set_trailing_metadata(((ERROR_CODE_KEY, str(error.code)),))
    return status


def abort(context: grpc.ServicerContext, error: LakelogError, metrics: ServerMetrics, method: str) -> None:
    """End the call with ``error`` (status, message, lakelog code) and count it."""
    context.abort(_count_and_mark(context, error, metrics, method), error.message)
