"""The one place where server-side errors become gRPC statuses.

Every handler is wrapped: a LakelogError becomes its status code, its message and its lakelog code
in trailing metadata; anything else is logged with its traceback and answered INTERNAL, so one bad
request never takes the server down. Every handler passes here, so here it is timed and its
failures counted, in the ``metrics`` of the service it belongs to.
"""

from __future__ import annotations

import functools
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
    method = handler.__name__

    @functools.wraps(handler)
    def wrapper(self: InstrumentedService, request: Any, context: grpc.ServicerContext) -> Any:
        started = time.perf_counter()
        try:
            if isinstance(request, MalformedRequest):
                raise InvalidRequestError(f"{method}: the request is not a valid {request.message_name} ({request.reason})")
            return handler(self, request, context)
        except LakelogError as error:
            abort(context, error, self.metrics, method)
        except Exception as exc:  # noqa: BLE001 - the boundary: report, never crash the server
            log.exception("%s failed unexpectedly", method)
            abort(context, UnknownServerError(f"{method} failed: {type(exc).__name__}: {exc}"), self.metrics, method)
        finally:
            self.metrics.observe_rpc(method, time.perf_counter() - started)

    return wrapper  # type: ignore[return-value]


def abort(context: grpc.ServicerContext, error: LakelogError, metrics: ServerMetrics, method: str) -> None:
    """End the call with ``error`` (status, message, lakelog code) and count it."""
    status = status_code(error)
    metrics.count_error(method, error, status.name)
    context.set_trailing_metadata(((ERROR_CODE_KEY, str(error.code)),))
    context.abort(status, error.message)
