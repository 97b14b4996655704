"""One gRPC server process hosting the coordinator, a tablet server, or both (the embedded default).

``lakelog server`` runs both roles behind one port; ``lakelog coordinator`` and
``lakelog tablet-server`` run them apart so several tablet servers can share a coordinator.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable, Mapping

import grpc

from lakelog.config import Configuration
from lakelog.errors import InvalidConfigError
from lakelog.cluster_state import ServerNode
from lakelog.server.coordinator_server import CoordinatorRole
from lakelog.server.allocator import keep_buffers_on_heap
from lakelog.server.data_dir_lock import DataDirLock
from lakelog.server.log.log_tablet import wall_clock_ms
from lakelog.server.metrics.http_token_gate import TokenGate
from lakelog.metrics_endpoint import MetricsEndpoint
from lakelog.server.metrics.server_metrics import ServerMetrics
from lakelog.server.metrics.tablet_collector import TabletStateCollector
from lakelog.server.open_file_limit import raise_open_file_limit
from lakelog.security.tls import server_credentials
from lakelog.server.rpc.auth_interceptor import AuthInterceptor, anonymous_caller
from lakelog.server.rpc.cluster_secret import ClusterMemberInterceptor, cluster_secret
from lakelog.server.rpc.grpc_server import bind_server, start_server
from lakelog.server.rpc.replica_stream_server import ReplicaStreamServer
from lakelog.server.rpc.tablet_service import TabletService
from lakelog.server.tablet_server import TabletServerRole

log = logging.getLogger(__name__)

ROLES = ("coordinator", "tablet-server")


class ServerProcess:
    """Start with :meth:`start` (or ``with``); :attr:`address` is where clients connect."""

    def __init__(
        self,
        conf: Configuration | Mapping[str, Any],
        roles: tuple[str, ...] = ROLES,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        """``clock``: the tablet server's clock for commit timestamps (ms since the epoch)."""
        self.conf = conf if isinstance(conf, Configuration) else Configuration(conf)
        unknown = set(roles) - set(ROLES)
        if unknown or not roles:
            raise InvalidConfigError(f"roles must be among {ROLES}, got {roles}")
        if "coordinator" not in roles and not self.conf.get("coordinator.address"):
            raise InvalidConfigError("a tablet server on its own needs coordinator.address (--coordinator HOST:PORT)")
        self.roles = roles
        self._clock = clock
        self.data_dir = Path(self.conf.get("data.dir")).resolve()
        self.coordinator: CoordinatorRole | None = None
        self.tablet: TabletServerRole | None = None
        self.port = 0
        self._server: Any = None
        self._replica_stream: ReplicaStreamServer | None = None
        self._stopped = threading.Event()
        self.metrics = ServerMetrics()
        self._metrics_endpoint: MetricsEndpoint | None = None
        self._lock: DataDirLock | None = None

    @property
    def host(self) -> str:
        advertised = self.conf.get("server.advertised-host")
        bind = self.conf.get("server.host")
        return advertised or ("127.0.0.1" if bind in ("0.0.0.0", "::", "") else bind)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def metrics_port(self) -> int:
        """The port of the Prometheus endpoint, -1 when ``metrics.port`` turned it off."""
        return self._metrics_endpoint.port if self._metrics_endpoint else -1

    @property
    def status_url(self) -> str:
        """The coordinator's status page, served with the metrics (empty when they are off)."""
        if self._metrics_endpoint is None or self.coordinator is None:
            return ""
        return self._metrics_endpoint.url.removesuffix("/metrics") + "/status"

    def start(self) -> "ServerProcess":
        credentials = server_credentials(self.conf)  # read first: a bad key or file fails before anything opens
        auth = AuthInterceptor.from_configuration(self.conf, self.metrics)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        keep_buffers_on_heap(self.conf.get("server.malloc.mmap-threshold"))
        raise_open_file_limit()  # a tablet server keeps every local segment of its buckets open
        self._lock = DataDirLock(self.data_dir)  # before anything in the directory is opened
        try:
            self._start(credentials, auth)
        except BaseException:
            self.stop(0)  # a port in use, say: close what opened and free the directory
            raise
        return self

    def _start(self, credentials: grpc.ServerCredentials | None, auth: AuthInterceptor | None) -> None:
        secret = cluster_secret(self.conf, self.data_dir, embedded=self.roles == ROLES)
        # With user authentication a token's `internal` action admits a cluster member; without, the secret does.
        interceptors: list[grpc.ServerInterceptor] = [auth] if auth else []
        if auth is None and secret:
            interceptors.append(ClusterMemberInterceptor(secret, self.metrics))
        elif auth is None:
            log.warning("cluster.secret is not set: internal RPCs (tablet registration, notifications) accept any caller")
        self._server, self.port = bind_server(
            self.conf.get("server.host"),
            self.conf.get("server.port"),
            self.conf.get("server.rpc.threads"),
            self.conf.get("rpc.max-message-size"),
            self.conf.get("server.rpc.max-concurrent-streams"),
            credentials,
            interceptors,
        )
        if "coordinator" in self.roles:
            self.coordinator = CoordinatorRole(self.conf, self.data_dir, secret)
        if "tablet-server" in self.roles:
            self.tablet = TabletServerRole(self.conf, self.data_dir, secret, self._clock)
        node_id = self.tablet.server_id if self.tablet else -1
        caller = auth.caller_name if auth else anonymous_caller
        registrations, names = [], []
        if self.tablet:
            service = self.tablet.service(self.metrics, caller)
            self._start_replica_stream(service, secret, tls=credentials is not None)
            registrations.append(service.register)
            self.metrics.registry.register(TabletStateCollector(self.tablet.replicas, self.tablet.logs, self.tablet.remote))
            names.append("TabletService")
        if self.coordinator:
            registrations.append(self.coordinator.service(ServerNode(-1, self.host, self.port), self.metrics, caller).register)
            names.append("CoordinatorService")
        start_server(self._server, registrations, names)
        log.info("lakelog %s listening on %s (data dir %s)", "+".join(self.roles), self.address, self.data_dir)
        self._log_security(credentials is not None, auth)
        if self.conf.get("metrics.port") >= 0:
            pages = self.coordinator.status_pages() if self.coordinator else {}
            tls = (self.conf.get("security.tls.cert-file"), self.conf.get("security.tls.key-file")) if credentials else None
            guard = TokenGate(auth.tokens).guard if auth else None
            self._metrics_endpoint = MetricsEndpoint(
                self.metrics.registry, self.conf.get("metrics.host"), self.conf.get("metrics.port"), pages, tls, guard
            )
            log.info("Prometheus metrics at %s", self._metrics_endpoint.url)
            if pages:
                log.info("status page at %s", self.status_url)
        if self.tablet:
            coordinator_address = self.conf.get("coordinator.address") or self.address
            advertised = ServerNode(node_id, self.host, self.conf.get("server.advertised-port") or self.port)
            self.tablet.join(advertised, coordinator_address)

    def _start_replica_stream(self, service: TabletService, secret: str | None, tls: bool) -> None:
        """The replica stream beside gRPC, its port told to followers in their FetchLog answers; none
        under TLS (it is plaintext) or without a cluster secret (followers could not present one)."""
        port = self.conf.get("server.replica-stream.port")
        if port < 0 or tls or not secret:
            if port >= 0:
                log.info("no replica stream (%s): followers fetch over gRPC", "TLS is on" if tls else "no cluster secret")
            return
        stream = ReplicaStreamServer(service, secret)
        try:
            service.replica_stream_port = stream.start(self.conf.get("server.host"), port)
            self._replica_stream = stream
        except OSError as exc:
            raise InvalidConfigError(f"cannot listen on {self.conf.get('server.host')}:{port} (server.replica-stream.port): {exc}") from None
        log.info("replica stream listening on %s:%d", self.conf.get("server.host"), service.replica_stream_port)

    def _log_security(self, tls: bool, auth: AuthInterceptor | None) -> None:
        """One line at start saying what protects the port: file paths and counts, never secrets."""
        if not tls and auth is None:
            return
        log.info(
            "security: TLS %s, token authentication %s",
            f"on (certificate {self.conf.get('security.tls.cert-file')})" if tls else "off",
            f"on ({auth.token_count} tokens from {self.conf.get('security.auth.tokens-file')})" if auth else "off",
        )
        if auth and not tls:
            log.warning("token authentication without TLS: tokens cross the network in clear text")

    def wait(self) -> None:
        self._stopped.wait()

    def stop(self, grace_s: float = 1.0) -> None:
        if self.tablet:
            self.tablet.replicas.shutdown()
        if self._replica_stream is not None:
            self._replica_stream.close()
            self._replica_stream = None
        if self._server is not None:
            self._server.stop(grace_s)
            self._server = None
        if self._metrics_endpoint is not None:
            self._metrics_endpoint.close()
            self._metrics_endpoint = None
        if self.tablet:
            self.tablet.close()
        if self.coordinator:
            self.coordinator.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        log.info("lakelog %s at %s stopped", "+".join(self.roles), self.address)
        self._stopped.set()

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
