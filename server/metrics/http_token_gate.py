"""Token authentication of the HTTP port of a server's metrics (``/metrics``) and status page
(``/status``, ``/status.json``).

With ``security.auth.enabled`` every path needs a token of ``security.auth.tokens-file`` that
allows ``read``, the same tokens and action as the gRPC read calls: sent as ``Authorization: Bearer
<token>`` (Prometheus' ``authorization`` setting, scripts) or as the password of HTTP Basic auth,
which a browser asks for by itself (any user name), so a person needs nothing but the token.
"""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Any, Callable, Iterable

from lakelog.errors import AuthenticationError, AuthorizationError
from lakelog.security.tokens import Action, TokenStore
from lakelog.metrics_endpoint import WsgiApp

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]

_CHALLENGE = ("WWW-Authenticate", 'Basic realm="lakelog", charset="UTF-8"')


class TokenGate:
    """Lets a request through to its page only with a token that allows ``read``."""

    def __init__(self, tokens: TokenStore) -> None:
        self._tokens = tokens

    def guard(self, app: WsgiApp) -> WsgiApp:
        def guarded(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
            path = environ.get("PATH_INFO", "")
            try:
                self._tokens.authenticate(_as_bearer(environ.get("HTTP_AUTHORIZATION"))).require(Action.READ, f"GET {path}")
            except AuthenticationError as error:
                log.warning("refused GET %s: %s", path, error.message)
                return answer(start_response, "401 Unauthorized", f"{error.message}\n".encode(), extra=[_CHALLENGE])
            except AuthorizationError as error:
                log.warning("refused GET %s: %s", path, error.message)
                return answer(start_response, "403 Forbidden", f"{error.message}\n".encode())
            return app(environ, start_response)

        return guarded


def _as_bearer(authorization: str | None) -> str | None:
    """HTTP Basic credentials as the bearer token they carry (the password); anything else as is."""
    if not authorization or not authorization.lower().startswith("basic "):
        return authorization
    try:
        _, _, token = base64.b64decode(authorization[6:].strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return authorization
    return f"Bearer {token}"


def answer(
    start_response: StartResponse,
    status: str,
    body: bytes,
    content_type: str = "text/plain; charset=utf-8",
    extra: list[tuple[str, str]] | None = None,
) -> Iterable[bytes]:
    """A whole answer: status, headers (``extra`` among them) and body."""
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body))), *(extra or [])])
    return [body]
