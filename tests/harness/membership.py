"""Cluster membership in tests: the secret every server of a multi-process cluster is given, and
raw calls made as a member (with the embedded server's own secret)."""

from __future__ import annotations

from lakelog.server.server_process import ServerProcess

SECRET = {"cluster.secret": "test-cluster-secret"}  # what every server of a multi-process cluster is given


def member_metadata(server: ServerProcess) -> tuple[tuple[str, str], ...]:
    """gRPC metadata that makes a raw call a cluster member's: the embedded server's own secret."""
    return (("lakelog-cluster-secret", (server.data_dir / "cluster-secret").read_text()),)
