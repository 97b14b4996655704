"""The HTTP endpoint Prometheus scrapes: prometheus_client's own WSGI server on a daemon thread."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server

from lakelog.errors import InvalidConfigError


class MetricsEndpoint:
    """Serves ``registry`` at ``http://host:port/metrics`` from construction until :meth:`close`."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        try:
            self._server, self._thread = start_http_server(port, host, registry)
        except OSError as exc:
            raise InvalidConfigError(f"cannot serve metrics on {host}:{port}: {exc}") from None
        self.port: int = self._server.server_port
        self.url = f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
