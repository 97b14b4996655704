"""The one place where server-side errors become gRPC statuses.

Every handler is wrapped: a LakelogError becomes its status code, its message and its lakelog code
in trailing metadata; anything else is logged with its traceback and answered INTERNAL, so one bad
request never takes the server down.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, TypeVar

import grpc

from lakelog.errors import LakelogError, UnknownServerError
from lakelog.rpc.status import ERROR_CODE_KEY, status_code

log = logging.getLogger(__name__)

Handler = TypeVar("Handler", bound=Callable[..., Any])


def rpc_method(handler: Handler) -> Handler:
    @functools.wraps(handler)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return handler(self, request, context)
        except LakelogError as error:
            _abort(context, error)
        except Exception as exc:  # noqa: BLE001 - the boundary: report, never crash the server
            log.exception("%s failed unexpectedly", handler.__name__)
            _abort(context, UnknownServerError(f"{handler.__name__} failed: {type(exc).__name__}: {exc}"))

    return wrapper  # type: ignore[return-value]


def _abort(context: grpc.ServicerContext, error: LakelogError) -> None:
    context.set_trailing_metadata(((ERROR_CODE_KEY, str(error.code)),))
    context.abort(status_code(error), error.message)
