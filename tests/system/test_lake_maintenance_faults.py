"""`lakelog lake compact` and `lakelog lake expire` as a user runs them, and killed with SIGKILL at
each of their kill points: the lake stays readable and exact, and the next run finishes the work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable

import pytest

import lakelog
from lakelog.lake.snapshot_summary import COMPACTION, latest_lake_snapshot
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.kill_points import COMPACT_AFTER_COMMIT, COMPACT_AFTER_WRITE, EXPIRE_AFTER_COMMIT, KILL_AT_ENV
from lakelog.tiering.lake_maintenance import LakeMaintenance
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.harness.lake_compaction import BUCKETS, COMPACTED_TABLE, PATH, data_files, lake_rows, tier_rounds
from tests.harness.lake_tier import assert_lake_holds_log, lake_table
from tests.harness.tables import create_table


def run_lake(address: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m lakelog lake ARGS` in its own process (a compaction starts its own SparkSession)."""
    command = [sys.executable, "-m", "lakelog", "lake", *args, "--bootstrap", address, "--table", str(PATH)]
    if args[0] == "compact":
        command += ["--spark-master", "local[1]"]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


def _tiered(spark: Any, server_factory: Callable[..., ServerProcess], rounds: int = 3) -> ServerProcess:
    """No orphan grace: the next job removes a killed run's files at once."""
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        properties = {**COMPACTED_TABLE, "table.datalake.orphan-grace": "0ms"}
        tier_rounds(spark, server, create_table(conn, buckets=BUCKETS, properties=properties), rounds=rounds, records=2000)
    return server


def test_lake_compact_reports_its_progress_and_result(spark: Any, server_factory: Callable[..., ServerProcess]) -> None:
    server = _tiered(spark, server_factory)
    result = run_lake(server.address, "compact")
    assert result.returncode == 0, result.stderr
    assert "lakelog lake compact: shop.orders: 6,000 records to compact in 2 tasks" in result.stderr
    assert f"shop.orders: {3 * BUCKETS} files -> {BUCKETS}, 6,000 records" in result.stdout
    assert len(data_files(server)) == BUCKETS
    assert_lake_holds_log(server, PATH)
    again = run_lake(server.address, "compact")
    assert again.returncode == 0 and "shop.orders: nothing to compact" in again.stdout


def test_lake_commands_name_a_table_that_is_not_lake_enabled(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        create_table(conn)
    for action in ("compact", "expire"):
        result = run_lake(server.address, action)
        assert result.returncode == 1
        assert "table shop.orders is not lake-enabled" in result.stderr


@pytest.mark.parametrize("kill_at", [COMPACT_AFTER_WRITE, COMPACT_AFTER_COMMIT])
def test_a_compaction_killed_at_each_step_leaves_the_lake_readable_and_exact(
    spark: Any, server_factory: Callable[..., ServerProcess], kill_at: str
) -> None:
    server = _tiered(spark, server_factory)
    before = lake_rows(server)
    tiered = latest_lake_snapshot(lake_table(server, PATH))
    killed = run_lake(server.address, "compact", env={KILL_AT_ENV: kill_at})
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    assert lake_rows(server).equals(before), "plain PyIceberg reads the same rows"
    with lakelog.connect(server.address) as conn:
        # The coordinator still holds the tiering snapshot, which still reads whole.
        assert conn.admin.get_lake_snapshot(PATH) == tiered
        assert lake_rows(server, snapshot_id=tiered.snapshot_id).equals(before)
    compacted = lake_table(server, PATH).current_snapshot().summary.get(COMPACTION) is not None
    assert compacted == (kill_at == COMPACT_AFTER_COMMIT)

    with LakeMaintenance(server.address, spark=spark) as jobs:
        report = jobs.compactor().compact(PATH)
    assert (report.snapshot_id is None) == compacted, "the next run does what the killed one did not commit"
    assert len(data_files(server)) == BUCKETS
    # The next tiering round catches the coordinator up and removes the killed run's unreferenced files.
    with TieringJob(TieringOptions(server.address, tables=(PATH,)), spark=spark) as job:
        assert job.run_round().records == 0
    assert_lake_holds_log(server, PATH)
    assert lake_rows(server).equals(before)
    assert _warehouse_files(server) == {f.removeprefix("file://") for f in lake_table(server, PATH).inspect.all_data_files().column("file_path").to_pylist()}


def test_an_expiry_killed_before_deleting_files_leaves_them_to_the_next_one(
    spark: Any, server_factory: Callable[..., ServerProcess]
) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        properties = {**COMPACTED_TABLE, "table.datalake.snapshot-retention": "1s", "table.datalake.orphan-grace": "1s"}
        tier_rounds(spark, server, create_table(conn, buckets=BUCKETS, properties=properties), rounds=3, records=2000)
    with LakeMaintenance(server.address, spark=spark) as jobs:
        jobs.compactor().compact(PATH)
    with lakelog.connect(server.address) as conn:  # a round on top: every reader moves past the small files
        tier_rounds(spark, server, conn.get_table(PATH), rounds=1, records=2000, first=6000)
    before = lake_rows(server)
    compacted_files = set(data_files(server))  # the compacted ones and the last round's
    time.sleep(1.2)  # the tiering snapshots were replaced longer ago than the retention

    killed = run_lake(server.address, "expire", env={KILL_AT_ENV: EXPIRE_AFTER_COMMIT})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    table = lake_table(server, PATH)
    assert len(table.snapshots()) == 1, "the snapshots went"
    assert lake_rows(server).equals(before)
    assert len(_warehouse_files(server)) == 3 * BUCKETS + len(compacted_files), "their files were not deleted yet"

    result = run_lake(server.address, "expire")
    assert result.returncode == 0, result.stderr
    assert f"expired 0 snapshot(s), kept 1; deleted 0 file(s) only they referenced and {3 * BUCKETS} orphan data file(s)" in result.stdout
    assert _warehouse_files(server) == {f.removeprefix("file://") for f in compacted_files}
    assert lake_rows(server).equals(before)
    with lakelog.connect(server.address) as conn:
        assert conn.admin.get_lake_snapshot(PATH).snapshot_id == table.current_snapshot().snapshot_id


def _warehouse_files(server: ServerProcess) -> set[str]:
    return {str(p) for p in (server.data_dir / "lake" / "warehouse" / "shop" / "orders" / "data").rglob("*.parquet")}
