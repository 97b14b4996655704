"""Tiering status (docs/contract.md, "Tiering, consistent cuts and cursors"): the coordinator stores what each tiering job reported, and
``get_tiering_status`` / ``lakelog tier status`` give per table the last barrier, the lake's max
timestamp, the lag and the offsets behind, matching what the test produced and tiered."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime, timezone
from typing import Any, Callable

import lakelog
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.harness.lake_tier import LAKE_TABLE
from tests.harness.tables import create_table, log_rows, produce_orders

BUCKETS = 2


def test_status_matches_what_was_produced_and_tiered(spark: Any, server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        tables = [create_table(conn, name, buckets=BUCKETS, properties=LAKE_TABLE) for name in ("a", "b")]
        assert conn.admin.get_tiering_status() == {}
        for table in tables:
            produce_orders(table, 0, 3_000)
        time.sleep(0.01)  # past the commit timestamps: the round's barrier is the servers' clock minus 1 ms
        with TieringJob(TieringOptions(server.address, tables=(tables[0].path,)), spark=spark) as job:
            report = job.run_round()
            assert report.records == 3_000
        produce_orders(tables[0], 3_000, 700)
        rows = log_rows(server.address, tables[0].path).to_pylist()
        tiered_max = max(row["__timestamp"] for row in rows if row["id"] < 3_000)

        [info] = conn.admin.get_tiering_jobs()
        assert (info.job_id, info.tables, info.last_barrier) == (job.commit_user, (tables[0].path,), report.barrier)
        assert 0 < time.time_ns() // 1_000_000 - info.last_heartbeat_ms < 60_000
        before = time.time_ns() // 1_000_000
        status = conn.admin.get_tiering_status()
        after = time.time_ns() // 1_000_000
        assert list(status) == [tables[0].path], "only tables a job reported"
        got = status[tables[0].path]
        assert (got.job_id, got.last_barrier, got.offsets_behind) == (job.commit_user, report.barrier, 700)
        assert got.lake_max_timestamp == tiered_max <= report.barrier
        assert before - tiered_max <= got.lag_ms <= after - tiered_max

    command = [sys.executable, "-m", "lakelog", "tier", "status", "--bootstrap", server.address]
    printed = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0, printed.stderr
    header, _, row = printed.stdout.splitlines()
    assert header.split()[:3] == ["table", "job", "last"]
    barrier_time = datetime.fromtimestamp(report.barrier / 1000, timezone.utc).isoformat(timespec="milliseconds")
    assert row.split()[:3] == [str(tables[0].path), job.commit_user, barrier_time] and row.split()[-1] == "700"
    as_json = json.loads(subprocess.run([*command, "--output", "json"], capture_output=True, text=True, timeout=60).stdout)
    assert as_json == [{
        "table": str(tables[0].path), "job": job.commit_user, "last_barrier_ms": report.barrier,
        "lake_max_timestamp_ms": tiered_max, "lag_ms": as_json[0]["lag_ms"], "offsets_behind": 700,
    }]

    # The coordinator stores what jobs reported: a restart keeps the status.
    server.stop(0)
    restarted = server_factory()
    with lakelog.connect(restarted.address) as conn:
        assert conn.admin.get_tiering_jobs() == [info]
        again = conn.admin.get_tiering_status()[tables[0].path]
        assert (again.job_id, again.last_barrier, again.offsets_behind) == (job.commit_user, report.barrier, 700)
