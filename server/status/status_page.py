"""The status page over HTTP, on the metrics port: ``/status`` (one self-contained HTML file shipped
in the package, no asset from the internet) and ``/status.json`` (:meth:`ClusterStatus.snapshot`,
which the page polls). With ``security.auth.enabled`` the port lets only requests with a ``read``
token through (see :mod:`lakelog.server.metrics.http_token_gate`).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Callable, Iterable

from lakelog.server.metrics.http_token_gate import StartResponse, answer
from lakelog.metrics_endpoint import WsgiApp
from lakelog.server.status.cluster_status import ClusterStatus

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


class StatusPage:
    def __init__(self, status: ClusterStatus) -> None:
        self._status = status
        self._html = resources.files(__package__).joinpath("status.html").read_bytes()

    def routes(self) -> dict[str, WsgiApp]:
        return {PAGE: self._page, DATA: self._data}

    def _page(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        return self._serve(environ, start_response, "text/html; charset=utf-8", lambda: self._html)

    def _data(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        return self._serve(environ, start_response, "application/json", lambda: json.dumps(self._status.snapshot()).encode())

    def _serve(self, environ: dict[str, Any], start_response: StartResponse, content_type: str, body: Callable[[], bytes]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "GET":
            return answer(start_response, "405 Method Not Allowed", b"GET only\n", extra=[("Allow", "GET"), *_HEADERS])
        return answer(start_response, "200 OK", body(), content_type, extra=_HEADERS)
