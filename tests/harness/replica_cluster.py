"""A coordinator and several tablet servers, each its own OS process, sharing one remote
directory: the cluster replicated buckets are tested on (kill -9, SIGSTOP, a wiped disk)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Iterable

import lakelog
from tests.harness.metrics_scrape import metric_sum
from tests.harness.os_process import Process, port_open
from tests.harness.s3 import free_port
from tests.harness.waiting import wait_until

SECRET = "replica-cluster-secret"


class ReplicaCluster:
    def __init__(
        self,
        root: Path,
        servers: Iterable[int] = (1, 2, 3),
        tablet_settings: dict[str, str] | None = None,
        coordinator_settings: dict[str, str] | None = None,
        client_settings: dict[str, str] | None = None,
    ) -> None:
        """``client_settings``: what :meth:`connect` gives every connection unless told otherwise."""
        self.root = root
        self.client_settings = client_settings or {}
        self.coordinator_port = free_port()
        self.tablet_settings = {
            "tablet-server.heartbeat.interval": "200ms",
            "remote.data.dir": f"file://{root / 'remote'}",
            **(tablet_settings or {}),
        }
        self.coordinator = self._process(
            "coordinator", "coordinator", root / "c", self.coordinator_port,
            {"coordinator.tablet-server.heartbeat-timeout": "2s", **(coordinator_settings or {})},
        )
        self.metrics_ports = {server_id: free_port() for server_id in [0, *servers]}  # 0: the coordinator's
        self.coordinator.args += ["--set", f"metrics.port={self.metrics_ports[0]}"]
        self.tablets = {
            server_id: self._process(
                f"tablet-{server_id}", "tablet-server", self.tablet_dir(server_id), free_port(),
                {**self.tablet_settings, "metrics.port": str(self.metrics_ports[server_id])},
                "--coordinator", self.address, "--server-id", str(server_id),
            )
            for server_id in servers
        }

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.coordinator_port}"

    def tablet_dir(self, server_id: int) -> Path:
        return self.root / f"t{server_id}"

    def _process(self, name: str, role: str, data_dir: Path, port: int, settings: dict[str, str], *extra: str) -> Process:
        args = [sys.executable, "-m", "lakelog", role, "--data-dir", str(data_dir), "--port", str(port), "--set", f"cluster.secret={SECRET}"]
        for key, value in settings.items():
            args += ["--set", f"{key}={value}"]
        return Process(name, [*args, *extra], self.root, lambda: port_open(port))

    def start(self) -> "ReplicaCluster":
        self.coordinator.start()
        for server_id in self.tablets:
            self.start_tablet(server_id)
        return self

    def log_bytes(self, server_id: int) -> int:
        """Bytes of every segment of the server's copies of buckets, read from its data directory."""
        return sum(path.stat().st_size for path in self.tablet_dir(server_id).glob("tablet-server/log/*/*/*.log"))

    def move_tablet(self, server_id: int) -> None:
        """The next start of the (stopped) server listens on another port, as a restarted container may."""
        process = self.tablets[server_id]
        port = free_port()
        index = process.args.index("--port") + 1
        process.args[index] = str(port)
        process.ready = lambda: port_open(port)

    def tablet_address(self, server_id: int) -> str:
        process = self.tablets[server_id]
        return f"127.0.0.1:{process.args[process.args.index('--port') + 1]}"

    def start_tablet(self, server_id: int) -> None:
        marker = f"tablet server {server_id} registered"
        before = self.coordinator.log_path.read_text().count(marker) if self.coordinator.log_path.exists() else 0
        self.tablets[server_id].start()
        wait_until(lambda: self.coordinator.log_path.read_text().count(marker) > before, marker)

    def metric(self, server_id: int, name: str) -> float:
        """A metric of a tablet server (0: the coordinator), summed over its samples."""
        return metric_sum(self.metrics_ports[server_id], name)

    def wipe(self, server_id: int) -> None:
        """The server's disk as a new one: its data directory gone (the server id is given again)."""
        shutil.rmtree(self.tablet_dir(server_id))

    def stop(self) -> None:
        for process in [*self.tablets.values(), self.coordinator]:
            process.stop()

    def __enter__(self) -> "ReplicaCluster":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def connect(self, config: dict[str, str] | None = None) -> lakelog.Connection:
        return lakelog.connect(self.address, {**self.client_settings, **(config or {})})
