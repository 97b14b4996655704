"""The lake and remote tiers in tests: table and server settings, the lake's rows beside the log's,
a tiering job in its own process, and remote expiry on a moved clock."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import lakelog
from lakelog.server.server_process import ServerProcess
from tests.harness.tables import ORDERS_SCHEMA, log_rows

LAKE_TABLE = {"table.datalake.enabled": "true"}
# Small segments uploaded at once, one kept locally: most of a bucket is read from remote storage.
REMOTE_TIER = {"log.segment.max-bytes": "256kb", "remote.log.task-interval": "200ms"}
# Metrics (and the status page) on, small segments; the remote task runs only when a test says so
# (run_once, expire_remote).
TIERED_SERVER = {"metrics.port": 0, "log.segment.max-bytes": "64kb", "remote.log.task-interval": "1h"}
# One local segment kept once uploaded; remote segments expire an hour after the lake holds them.
TIERED_TABLE = {**LAKE_TABLE, "table.log.ttl": "1h", "table.log.tiered.local-segments": "1"}


def lake_table(server: ServerProcess, path: lakelog.TablePath) -> Any:
    """The PyIceberg table of ``path``, opened with the server's full lake configuration."""
    from lakelog.lake.lake_catalog import LakeCatalog
    from lakelog.lake_config import LakeConfig

    return LakeCatalog(LakeConfig.from_configuration(server.conf, server.data_dir)).load_table(path)


def assert_lake_holds_log(server: ServerProcess, path: lakelog.TablePath) -> pa.Table:
    """The lake holds every offset of every bucket exactly once, with the log's values and
    timestamps, and the coordinator's lake snapshot is the lake's latest. Returns the lake rows."""
    from lakelog.lake.snapshot_summary import latest_lake_snapshot

    table = lake_table(server, path)
    lake = table.scan().to_arrow().sort_by([("__bucket", "ascending"), ("__offset", "ascending")])
    log = log_rows(server.address, path)
    assert lake.num_rows == log.num_rows
    assert lake.column("__bucket").equals(log.column("__bucket"))
    assert lake.column("__offset").equals(log.column("__offset"))
    millis = pc.divide(lake.column("__timestamp").cast(pa.int64()), 1000)
    assert millis.equals(log.column("__timestamp"))
    names = ORDERS_SCHEMA.names
    assert lake.select(names).cast(ORDERS_SCHEMA).equals(log.select(names))
    with lakelog.connect(server.address) as conn:
        assert conn.admin.get_lake_snapshot(path) == latest_lake_snapshot(table)
    return lake


def run_tier(address: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m lakelog tier --once` in its own process (its own SparkSession)."""
    command = [sys.executable, "-m", "lakelog", "tier", "--bootstrap", address, "--once", "--spark-master", "local[2]", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


DAY_MS = 86_400_000


def expire_remote(manager: Any, days: float = 2) -> Any:
    """One remote pass of ``manager`` (a RemoteLogManager) as if ``days`` had passed, then its real
    clock back: what is past ``table.log.ttl`` (and, for a lake table, in the lake) expires. The pass's report."""
    real_clock = manager.clock
    manager.clock = lambda: real_clock() + int(days * DAY_MS)
    try:
        return manager.run_once()
    finally:
        manager.clock = real_clock


def wait_for_remote(conn: lakelog.Connection, path: lakelog.TablePath) -> None:
    """Until every bucket's oldest records are in remote storage only."""
    deadline = time.monotonic() + 30
    while True:
        buckets = conn.admin.describe_buckets(path)
        if all(b.remote_log_end_offset > 0 and b.local_log_start_offset > 0 for b in buckets.values()):
            return
        assert time.monotonic() < deadline, f"segments never moved to remote storage: {buckets}"
        time.sleep(0.2)
