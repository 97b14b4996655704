"""The status page over HTTP, on the metrics port: ``/status`` (one self-contained HTML file shipped
in the package, no asset from the internet) and ``/status.json`` (:meth:`ClusterStatus.snapshot`,
which the page polls).

With ``security.auth.enabled`` both need a token of ``security.auth.tokens-file`` that allows
``read``, the same tokens and action as the gRPC read calls: sent as ``Authorization: Bearer
<token>`` (scripts) or as the password of HTTP Basic auth, which a browser asks for by itself (any
user name), so a person needs nothing but the token.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from importlib import resources
from typing import Any, Callable, Iterable

from lakelog.errors import AuthenticationError, AuthorizationError
from lakelog.security.tokens import Action, TokenStore
from lakelog.server.metrics.metrics_endpoint import WsgiApp
from lakelog.server.status.cluster_status import ClusterStatus

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]

PAGE = "/status"
DATA = "/status.json"
# The page runs its own inline script and style and talks to this server only.
_HEADERS = [
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'",
    ),
]
_CHALLENGE = ("WWW-Authenticate", 'Basic realm="lakelog status", charset="UTF-8"')


class StatusPage:
    def __init__(self, status: ClusterStatus, tokens: TokenStore | None) -> None:
        """``tokens``: ``None`` when auth is off."""
        self._status = status
        self._tokens = tokens
        self._html = resources.files(__package__).joinpath("status.html").read_bytes()

    def routes(self) -> dict[str, WsgiApp]:
        return {PAGE: self._page, DATA: self._data}

    def _page(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        return self._serve(environ, start_response, "text/html; charset=utf-8", lambda: self._html)

    def _data(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        return self._serve(environ, start_response, "application/json", lambda: json.dumps(self._status.snapshot()).encode())

    def _serve(self, environ: dict[str, Any], start_response: StartResponse, content_type: str, body: Callable[[], bytes]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "GET":
            return _answer(start_response, "405 Method Not Allowed", b"GET only\n", extra=[("Allow", "GET")])
        refusal = self._refusal(environ.get("HTTP_AUTHORIZATION"), environ.get("PATH_INFO", ""))
        if refusal is not None:
            status, message = refusal
            return _answer(start_response, status, f"{message}\n".encode(), extra=[_CHALLENGE] if status.startswith("401") else [])
        return _answer(start_response, "200 OK", body(), content_type)

    def _refusal(self, authorization: str | None, path: str) -> tuple[str, str] | None:
        """``(HTTP status, reason)`` when the request may not see the page, else ``None``."""
        if self._tokens is None:
            return None
        try:
            self._tokens.authenticate(_as_bearer(authorization)).require(Action.READ, f"GET {path}")
        except AuthenticationError as error:
            log.warning("refused GET %s: %s", path, error.message)
            return "401 Unauthorized", error.message
        except AuthorizationError as error:
            log.warning("refused GET %s: %s", path, error.message)
            return "403 Forbidden", error.message
        return None


def _as_bearer(authorization: str | None) -> str | None:
    """HTTP Basic credentials as the bearer token they carry (the password); anything else as is."""
    if not authorization or not authorization.lower().startswith("basic "):
        return authorization
    try:
        _, _, token = base64.b64decode(authorization[6:].strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return authorization
    return f"Bearer {token}"


def _answer(
    start_response: StartResponse,
    status: str,
    body: bytes,
    content_type: str = "text/plain; charset=utf-8",
    extra: list[tuple[str, str]] | None = None,
) -> Iterable[bytes]:
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body))), *(extra or []), *_HEADERS])
    return [body]
