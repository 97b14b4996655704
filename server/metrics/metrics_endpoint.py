"""The HTTP endpoint Prometheus scrapes: prometheus_client's own WSGI server on a daemon thread,
with other pages (the coordinator's status page) on the same port."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, start_http_server

from lakelog.errors import InvalidConfigError

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


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
    ) -> None:
        """``tls``: the certificate chain and key files to serve HTTPS with (``None``: plain HTTP)."""
        certfile, keyfile = tls or (None, None)
        try:
            self._server, self._thread = start_http_server(port, host, registry, certfile=certfile, keyfile=keyfile)
        except OSError as exc:
            raise InvalidConfigError(f"cannot serve metrics on {host}:{port}: {exc}") from None
        if pages:
            self._server.set_app(_with_pages(dict(pages), self._server.get_app()))
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
