"""The HTTP endpoint Prometheus scrapes, of the servers and of the tiering job alike:
prometheus_client's own WSGI server on a daemon thread, with other pages (the coordinator's status
page) on the same port, all behind one guard (a server's token authentication when it is on, see
:mod:`lakelog.server.metrics.http_token_gate`)."""

from __future__ import annotations

import logging
import socket
import ssl
from typing import Any, Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, start_http_server

from lakelog.errors import InvalidConfigError

log = logging.getLogger(__name__)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
# A TLS connection's handshake and request must come within this.
CONNECTION_TIMEOUT_S = 30.0


class MetricsEndpoint:
    """Serves ``registry`` at ``http://host:port/metrics``, and each of ``pages`` (path -> WSGI
    app) at its path, from construction until :meth:`close`."""

    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        pages: Mapping[str, WsgiApp] | None = None,
        tls: tuple[str, str] | None = None,
        guard: Callable[[WsgiApp], WsgiApp] | None = None,
    ) -> None:
        """``tls``: the certificate chain and key files to serve HTTPS with (``None``: plain HTTP);
        ``guard``: what every path passes first (token authentication, when on)."""
        try:
            context = _server_context(*tls) if tls else None
            self._server, self._thread = start_http_server(port, host, registry)
        except OSError as exc:
            raise InvalidConfigError(f"cannot serve metrics on {host}:{port}: {exc}") from None
        if context is not None:
            self._server.finish_request = _handshake_first(context, self._server.finish_request)  # type: ignore[method-assign]
        app = _with_pages(dict(pages), self._server.get_app()) if pages else self._server.get_app()
        self._server.set_app(guard(app) if guard else app)
        self.port: int = self._server.server_port
        self.url = f"{'https' if tls else 'http'}://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def _with_pages(pages: dict[str, WsgiApp], metrics: WsgiApp) -> WsgiApp:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        return pages.get(environ.get("PATH_INFO", ""), metrics)(environ, start_response)

    return app


def _server_context(certfile: str, keyfile: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certfile, keyfile)
    return context


def _handshake_first(context: ssl.SSLContext, finish_request: Callable[[Any, Any], None]) -> Callable[[socket.socket, Any], None]:
    """TLS per connection, in the connection's own thread. (prometheus_client's ``certfile`` wraps
    the listening socket, so the handshake runs in the accept loop, where one client that connects
    and stays silent stalls every other.)"""

    def finish(request: socket.socket, client_address: Any) -> None:
        request.settimeout(CONNECTION_TIMEOUT_S)
        try:
            secured = context.wrap_socket(request, server_side=True)
        except OSError as exc:  # ssl.SSLError included: plaintext, a bad handshake, a silent client
            log.debug("TLS handshake with %s failed: %s", client_address, exc)
            return
        with secured:
            finish_request(secured, client_address)

    return finish
