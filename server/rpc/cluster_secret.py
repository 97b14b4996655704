"""Cluster membership: the internal RPCs (registration, leadership and lake notifications) answer
only callers that present the cluster's secret, whether user authentication is on or off.

Without it, anyone who reaches the port could register as tablet server 0 at their own address and
receive every client's produce. The secret is ``cluster.secret`` when set (every server of a
multi-process cluster gets the same one); the embedded ``lakelog server`` needs no set-up: it
generates one under its data dir (mode 0600) and keeps it across restarts. Servers send it as
``lakelog-cluster-secret`` metadata; it is compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
from pathlib import Path
from typing import Callable, Iterable

import grpc

from lakelog.config import Configuration
from lakelog.errors import AuthorizationError, StorageError
from lakelog.security.tokens import Action, CallMetadata
from lakelog.server.metrics.server_metrics import ServerMetrics
from lakelog.server.rpc.auth_interceptor import RPC_ACTIONS, refusal

log = logging.getLogger(__name__)

CLUSTER_SECRET_KEY = "lakelog-cluster-secret"
SECRET_FILE = "cluster-secret"
INTERNAL_METHODS = frozenset(method for method, action in RPC_ACTIONS.items() if action is Action.INTERNAL)


def cluster_secret(conf: Configuration, data_dir: Path, embedded: bool) -> str | None:
    """``cluster.secret``; else, for the embedded server, the one kept in ``<data-dir>/cluster-secret``
    (created on first start); else None: a lone role without the key cannot know its peers' secret."""
    configured = conf.get("cluster.secret")
    if configured:
        return str(configured)
    if not embedded:
        return None
    path = data_dir / SECRET_FILE
    try:
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as file:
                file.write(secrets.token_hex(32))
        return path.read_text().strip()
    except OSError as exc:
        raise StorageError(f"cannot create or read the cluster secret {path}: {exc}") from exc


def with_cluster_secret(channel: grpc.Channel, secret: str | None) -> grpc.Channel:
    """A server's channel to a peer that presents the cluster secret on every call."""
    return grpc.intercept_channel(channel, CallMetadata((CLUSTER_SECRET_KEY, secret))) if secret else channel


def presents_cluster_secret(metadata: Iterable[tuple[str, str | bytes]] | None, secret: str | None) -> bool:
    """Whether a call's metadata carries the cluster secret (never, when there is none)."""
    if not secret:
        return False
    presented = next((str(v) for k, v in metadata or () if k == CLUSTER_SECRET_KEY), "")
    return hmac.compare_digest(presented.encode(), secret.encode())


class ClusterMemberInterceptor(grpc.ServerInterceptor):
    """Refuses the internal RPCs to callers without the secret (PERMISSION_DENIED, before the handler)."""

    def __init__(self, secret: str, metrics: ServerMetrics) -> None:
        self._secret = secret.encode()
        self._metrics = metrics

    def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None], details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(details)
        if handler is None or details.method not in INTERNAL_METHODS:
            return handler
        if presents_cluster_secret(details.invocation_metadata, self._secret.decode()):
            return handler
        method = details.method.rsplit("/", 1)[-1]
        error = AuthorizationError(
            f"{method} is for the servers of this cluster only: the call does not carry the cluster secret (cluster.secret)"
        )
        log.warning("refused %s: not a cluster member", details.method)
        return refusal(handler, method, error, self._metrics)
