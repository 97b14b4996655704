"""A coordinator and tablet servers each in a server of its own (in this process), with quick heartbeats."""

from __future__ import annotations

from pathlib import Path

from lakelog.server.server_process import ServerProcess

HEARTBEAT = {"tablet-server.heartbeat.interval": "100ms"}


def coordinator_apart(tmp_path: Path) -> ServerProcess:
    """A coordinator on its own, metrics on, that calls a tablet server down after 1 s of silence."""
    conf = {"data.dir": str(tmp_path / "c"), "server.port": 0, "metrics.port": 0, "coordinator.tablet-server.heartbeat-timeout": "1s"}
    return ServerProcess(conf, ("coordinator",)).start()


def tablet_server(tmp_path: Path, coordinator: ServerProcess, server_id: int) -> ServerProcess:
    conf = {
        "data.dir": str(tmp_path / f"t{server_id}"),
        "server.port": 0,
        "coordinator.address": coordinator.address,
        "tablet-server.id": server_id,
        **HEARTBEAT,
    }
    return ServerProcess(conf, ("tablet-server",)).start()
