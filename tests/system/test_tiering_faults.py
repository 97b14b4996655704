"""Exactly once under faults: tiering jobs killed with SIGKILL at the two dangerous points, two
jobs racing on one table, and what a restarted job cleans up."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.errors import LakelogError, LakeSnapshotNotExistError
from lakelog.lake.snapshot_summary import BUCKET_OFFSETS, latest_lake_snapshot
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.kill_points import AFTER_COMMIT, AFTER_WRITE, KILL_AT_ENV
from lakelog.tiering.orphan_files import remove_orphan_files
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.harness.lake_tier import LAKE_TABLE, assert_lake_holds_log, lake_table, run_tier
from tests.harness.tables import create_table, produce_orders

BUCKETS = 4
PATH = lakelog.TablePath("shop", "orders")


def _lake_server(server_factory: Callable[..., ServerProcess], records: int, properties: dict[str, str] = LAKE_TABLE) -> ServerProcess:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        produce_orders(create_table(conn, buckets=BUCKETS, properties=properties), 0, records)
    return server


def _data_files(server: ServerProcess) -> set[Path]:
    return set((server.data_dir / "lake" / "warehouse" / "shop" / "orders" / "data").rglob("*.parquet"))


def _referenced_files(server: ServerProcess) -> set[Path]:
    table = lake_table(server, PATH)
    return {Path(p.removeprefix("file://")) for p in table.inspect.all_data_files().column("file_path").to_pylist()}


def _tiering_snapshots(server: ServerProcess) -> int:
    return sum(1 for s in lake_table(server, PATH).snapshots() if s.summary and BUCKET_OFFSETS in s.summary)


def test_killed_after_writing_files_leaves_nothing_behind(spark: Any, server_factory: Callable[..., ServerProcess]) -> None:
    """With no orphan grace, the next job deletes the files a killed round left (with the default,
    an hour later: see the test below)."""
    server = _lake_server(server_factory, 20_000, {**LAKE_TABLE, "table.datalake.orphan-grace": "0ms"})
    killed = run_tier(server.address, env={KILL_AT_ENV: AFTER_WRITE})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    orphans = _data_files(server)
    assert len(orphans) == BUCKETS
    assert lake_table(server, PATH).current_snapshot() is None

    with TieringJob(TieringOptions(server.address), spark=spark) as restarted:
        assert restarted.run_round().records == 20_000
    assert_lake_holds_log(server, PATH)
    assert _data_files(server) == _referenced_files(server)
    assert not orphans & _data_files(server)


def test_a_long_running_job_removes_what_a_job_killed_while_it_ran_left(spark: Any, server_factory: Callable[..., ServerProcess]) -> None:
    """A job that already touched the table sweeps it again each orphan grace: the files of a round
    another job wrote, and was killed before committing, after this one started go too."""
    server = _lake_server(server_factory, 20_000, {**LAKE_TABLE, "table.datalake.orphan-grace": "2s"})
    with TieringJob(TieringOptions(server.address), spark=spark) as job:
        assert job.run_round().records == 20_000
        referenced = _data_files(server)
        with lakelog.connect(server.address) as conn:
            produce_orders(conn.get_table(PATH), 20_000, 4_000)
        killed = run_tier(server.address, env={KILL_AT_ENV: AFTER_WRITE})
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        orphans = _data_files(server) - referenced
        assert orphans, "the killed round wrote files it never committed"
        time.sleep(2.5)  # the killed round's files pass the grace, and so does the job's last sweep
        assert job.run_round().records == 4_000
    assert assert_lake_holds_log(server, PATH).num_rows == 24_000
    assert _data_files(server) == _referenced_files(server)
    assert not orphans & _data_files(server)


def test_killed_between_iceberg_commit_and_coordinator(spark: Any, server_factory: Callable[..., ServerProcess]) -> None:
    server = _lake_server(server_factory, 20_000)
    killed = run_tier(server.address, env={KILL_AT_ENV: AFTER_COMMIT})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    committed = latest_lake_snapshot(lake_table(server, PATH))
    assert committed is not None and sum(o.log_end_offset for o in committed.bucket_offsets.values()) == 20_000
    with lakelog.connect(server.address) as conn:
        with pytest.raises(lakelog.LakeSnapshotNotExistError):
            conn.admin.get_lake_snapshot(PATH)

        with TieringJob(TieringOptions(server.address), spark=spark) as restarted:
            assert restarted.run_round().records == 0  # nothing tiered twice...
            assert conn.admin.get_lake_snapshot(PATH) == committed  # ...and the coordinator caught up
            produce_orders(conn.get_table(PATH), 20_000, 4_000)
            assert restarted.run_round().records == 4_000
    assert assert_lake_holds_log(server, PATH).num_rows == 24_000
    assert _tiering_snapshots(server) == 2


def test_two_jobs_started_at_once(server_factory: Callable[..., ServerProcess]) -> None:
    server = _lake_server(server_factory, 40_000)
    command = [sys.executable, "-m", "lakelog.tiering", "--bootstrap", server.address, "--once", "--spark-master", "local[1]"]
    jobs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outcomes = [job.communicate(timeout=300) for job in jobs]
    assert [job.returncode for job in jobs] == [0, 0], [err for _, err in outcomes]
    assert sum(int(err.split("round 1: ")[1].split(" records")[0]) for _, err in outcomes) == 40_000
    assert assert_lake_holds_log(server, PATH).num_rows == 40_000
    assert _data_files(server) == _referenced_files(server)


def test_a_commit_loses_the_race_and_the_round_is_planned_again(
    spark: Any, server_factory: Callable[..., ServerProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Job A plans and writes; job B commits first; A's commit is refused, its files are deleted and
    A plans again from B's snapshot. PyIceberg's commit retries, switched on behind lakelog's back,
    would re-base A's append on B's snapshot: the job switches them off again first."""
    server = _lake_server(server_factory, 8_000)
    with lake_table(server, PATH).transaction() as transaction:
        transaction.set_properties({"commit.retry.num-retries": "4"})
    with TieringJob(TieringOptions(server.address), spark=spark) as job_a, TieringJob(TieringOptions(server.address), spark=spark) as job_b:
        write = job_a._write
        written: list[Path] = []

        def write_then_lose_the_race(plans: Any) -> Any:
            files = write(plans)
            written.extend(Path(f.file_path.removeprefix("file://")) for f in files)
            assert job_b.run_round().records == 8_000
            with lakelog.connect(server.address) as conn:
                produce_orders(conn.get_table(PATH), 8_000, 1_000)
            monkeypatch.setattr(job_a, "_write", write)
            return files

        monkeypatch.setattr(job_a, "_write", write_then_lose_the_race)
        report = job_a.run_round()
    assert report.records == 1_000
    assert len(written) == BUCKETS and not any(path.exists() for path in written)
    assert assert_lake_holds_log(server, PATH).num_rows == 9_000
    assert _data_files(server) == _referenced_files(server)
    assert _tiering_snapshots(server) == 2
    assert lake_table(server, PATH).properties["commit.retry.num-retries"] == "0"


def test_a_job_started_mid_round_spares_that_rounds_files(
    spark: Any, server_factory: Callable[..., ServerProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Job A writes its round's files; job B starts before A commits (a restart that overlapped the
    old job, a second ``--once`` run) and cleans up what no snapshot references; then A commits.
    A's files are older than B but not dead: B's cleanup must leave them, or A's snapshot names
    files that are gone and the round's records are lost to the lake."""
    server = _lake_server(server_factory, 8_000)
    with TieringJob(TieringOptions(server.address), spark=spark) as job_a:
        write = job_a._write

        def spark_job_fails(plans: Any) -> Any:
            raise RuntimeError("B's Spark job failed")

        def write_then_b_starts(plans: Any) -> Any:
            files = write(plans)
            with TieringJob(TieringOptions(server.address), spark=spark) as job_b:
                # B cleans up and plans, then its Spark job fails: A commits first.
                monkeypatch.setattr(job_b, "_write", spark_job_fails)
                with pytest.raises(RuntimeError, match="B's Spark job failed"):
                    job_b.run_round()
            monkeypatch.setattr(job_a, "_write", write)
            return files

        monkeypatch.setattr(job_a, "_write", write_then_b_starts)
        assert job_a.run_round().records == 8_000
    assert assert_lake_holds_log(server, PATH).num_rows == 8_000
    assert _data_files(server) == _referenced_files(server)


def test_orphan_cleanup_spares_files_newer_than_the_job(server_factory: Callable[..., ServerProcess]) -> None:
    server = _lake_server(server_factory, 0)
    table = lake_table(server, PATH)
    directory = server.data_dir / "lake" / "warehouse" / "shop" / "orders" / "data" / "__bucket=0"
    directory.mkdir(parents=True)
    old, fresh = directory / "old.parquet", directory / "fresh.parquet"
    for path in (old, fresh):
        pq.write_table(pa.table({"x": [1]}), path)
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    job_started = datetime.fromtimestamp(time.time() - 60, timezone.utc)
    assert remove_orphan_files(table, job_started) == [str(old)]
    assert not old.exists() and fresh.exists()


def test_unreachable_catalog_fails_the_round_cleanly_and_the_next_succeeds(
    spark: Any, server_factory: Callable[..., ServerProcess]
) -> None:
    """The lake (the default SQLite catalog and its warehouse) vanishes for one round."""
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, buckets=2, properties=LAKE_TABLE)
        produce_orders(table, 0, 3_000)
        lake_dir = server.data_dir / "lake"
        away = server.data_dir / "lake-unreachable"
        lake_dir.rename(away)
        try:
            with TieringJob(TieringOptions(server.address), spark=spark) as job:
                with pytest.raises(LakelogError) as failed:
                    job.run(once=True)
                assert "catalog" in str(failed.value).lower() or "lake" in str(failed.value).lower()
        finally:
            if lake_dir.exists():
                shutil.rmtree(lake_dir)
            away.rename(lake_dir)
        with pytest.raises(LakeSnapshotNotExistError):
            conn.admin.get_lake_snapshot(table.path)
        with TieringJob(TieringOptions(server.address), spark=spark) as job:
            assert job.run_round().records == 3_000
        assert_lake_holds_log(server, table.path)
