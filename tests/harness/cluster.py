"""The cluster a random walk drives: a coordinator and a tablet server in separate server objects
(so each restarts alone, on its own fixed port), remote segments on moto S3 behind a cuttable proxy,
the default SQLite lake, and the real PySpark tiering job."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import lakelog
from lakelog.remote_fs import file_system
from lakelog.server.log.log_tablet import LogTablet
from lakelog.server.remote.remote_log_manager import RemoteLogManager
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.lake_compaction import CompactionReport
from lakelog.tiering.lake_maintenance import LakeMaintenance
from lakelog.tiering.snapshot_expiry import ExpiryReport
from lakelog.tiering.tiering_job import RoundReport, TieringJob, TieringOptions
from tests.harness.lake_tier import expire_remote
from tests.harness.log_damage import damage_last_length
from tests.harness.s3 import MotoS3, free_port

TABLE_PROPERTIES = {
    "table.datalake.enabled": "true",
    "table.log.ttl": "1d",
    "table.log.tiered.local-segments": "2",
}


CLUSTER_SECRET = {"cluster.secret": "walk-cluster-secret"}  # the two processes are one cluster

class Cluster:
    def __init__(self, root: Path, moto: MotoS3, spark: Any) -> None:
        self.root = root
        self.moto = moto
        self.spark = spark
        self.coordinator_port = free_port()
        self.tablet_port = free_port()
        self.remote_dir = f"s3://{moto.create_bucket()}/remote"
        self.coordinator: ServerProcess | None = None
        self.tablet: ServerProcess | None = None
        self.s3_down = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.coordinator_port}"

    @property
    def client_config(self) -> dict[str, str]:
        return {
            **self.moto.settings(),
            "client.lake.source": "iceberg-arrow",
            "client.request-timeout": "20s",
            "client.scanner.partition-discovery.interval": "100ms",
        }

    def start_coordinator(self) -> None:
        self.coordinator = ServerProcess(
            {"data.dir": str(self.root / "coordinator"), "server.port": self.coordinator_port, **CLUSTER_SECRET}, ("coordinator",)
        ).start()

    def start_tablet(self) -> None:
        self.tablet = ServerProcess(
            {
                "data.dir": str(self.root / "tablet"),
                "server.port": self.tablet_port,
                "coordinator.address": self.address,
                "tablet-server.id": 1,
                **CLUSTER_SECRET,
                "log.segment.max-bytes": "48kb",
                "remote.data.dir": self.remote_dir,
                "remote.log.task-interval": "1h",
                "remote.fs.s3.max-attempts": "1",
                **self.moto.settings(),
            },
            ("tablet-server",),
        ).start()

    def start(self) -> None:
        self.start_coordinator()
        self.start_tablet()

    def stop(self) -> None:
        for process in (self.tablet, self.coordinator):
            if process is not None:
                process.stop(0)

    def restart_tablet(self) -> None:
        assert self.tablet is not None
        self.tablet.stop(0)
        self.start_tablet()

    def restart_coordinator(self) -> None:
        assert self.coordinator is not None
        self.coordinator.stop(0)
        self.start_coordinator()

    @property
    def remote(self) -> RemoteLogManager:
        assert self.tablet is not None and self.tablet.tablet is not None
        return self.tablet.tablet.remote

    def roll(self, table_id: int, bucket: int) -> None:
        assert self.tablet is not None and self.tablet.tablet is not None
        log = self.tablet.tablet.logs.get(table_id, bucket)
        assert log is not None
        log.roll()

    @property
    def tablet_address(self) -> str:
        return f"127.0.0.1:{self.tablet_port}"

    def local_log(self, table_id: int, bucket: int) -> LogTablet:
        assert self.tablet is not None and self.tablet.tablet is not None
        log = self.tablet.tablet.logs.get(table_id, bucket)
        assert log is not None
        return log

    def damage_manifest(self, path: lakelog.TablePath, table_id: int, bucket: int, how: str) -> None:
        """Delete (``deleted``) or cut short (``garbled``) a bucket's remote ``manifest.json``."""
        storage = self.remote.storage
        location = storage.tablet_dir(path, table_id, bucket).child("manifest.json")
        fs = file_system(storage.root, storage.settings)
        if how == "deleted":
            fs.delete_file(location.path)
        else:
            with fs.open_output_stream(location.path) as out:
                out.write(b'{"version": 3, "segm')

    def damage_segment(self, table_id: int, bucket: int, base_offset: int) -> bytes:
        """Stop the tablet server, damage the length field of the rolled segment at ``base_offset``
        as a bad sector would, start it again (it quarantines the segment). The original bytes."""
        path = self.local_log(table_id, bucket).segments[0].path.parent / f"{base_offset:020d}.log"
        assert self.tablet is not None
        self.tablet.stop(0)
        original = path.read_bytes()
        damage_last_length(path)
        self.start_tablet()
        return original

    def restore_segment(self, table_id: int, bucket: int, base_offset: int, original: bytes) -> None:
        """Put a quarantined segment's good bytes back, as an operator restoring it would."""
        directory = self.local_log(table_id, bucket).segments[0].path.parent
        assert self.tablet is not None
        self.tablet.stop(0)
        (directory / f"{base_offset:020d}.log.quarantined").unlink()
        (directory / f"{base_offset:020d}.log").write_bytes(original)
        self.start_tablet()

    def expire_remote(self) -> int:
        """One remote pass as if two days had passed: everything past ``table.log.ttl`` that the lake holds goes."""
        return expire_remote(self.remote, days=2).expired

    def tier_round(self) -> RoundReport:
        with TieringJob(TieringOptions(bootstrap=self.address, client_config=self.client_config), spark=self.spark) as job:
            return job.run_round()

    def compact_lake(self, path: lakelog.TablePath) -> CompactionReport:
        with LakeMaintenance(self.address, self.client_config, spark=self.spark) as jobs:
            return jobs.compactor().compact(path)

    def expire_lake(self, path: lakelog.TablePath) -> ExpiryReport:
        with LakeMaintenance(self.address, self.client_config) as jobs:
            return jobs.expiry().expire(path)

    def kill_tiering_mid_round(self, where: str) -> subprocess.CompletedProcess[str]:
        """`lakelog tier --once` in its own process, SIGKILLed at ``where`` of its round (if the
        round gets there: with nothing to tier, or S3 down, it exits on its own)."""
        env = {**os.environ, "LAKELOG_TIERING_KILL_AT": where}
        command = [
            sys.executable, "-m", "lakelog", "tier", "--bootstrap", self.address, "--once", "--spark-master", "local[1]",
            *[f"--set={key}={value}" for key, value in self.client_config.items()],
        ]
        return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)

    def cut_s3(self) -> None:
        self.moto.proxy.cut()
        self.s3_down = True

    def restore_s3(self) -> None:
        self.moto.proxy.restore()
        self.s3_down = False

    def connect(self) -> lakelog.Connection:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = lakelog.connect(self.address, self.client_config)
                conn.admin.list_databases()
                return conn
            except lakelog.NetworkError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
