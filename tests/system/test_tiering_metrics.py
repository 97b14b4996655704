"""The tiering job's metrics and round progress, scraped from its real endpoint while and after real
rounds run: in-process against the shared SparkSession, and as `lakelog tier --metrics-port 0` in
a process of its own, stopped with SIGTERM like a container."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable

import pytest

import lakelog
from lakelog.metrics_endpoint import MetricsEndpoint
from lakelog.server.server_process import ServerProcess
from lakelog.tiering import tiering_job
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from lakelog.version import __version__
from tests.harness.lake_tier import LAKE_TABLE, lake_table
from tests.harness.metrics_scrape import scrape
from tests.harness.tables import create_table, produce_orders


def test_a_round_moves_the_metrics_and_reports_progress(
    spark: Any,
    server_factory: Callable[..., ServerProcess],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.INFO, logger="lakelog.tiering")
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        orders = create_table(conn, buckets=2, properties=LAKE_TABLE)
        broken = create_table(conn, name="broken", properties=LAKE_TABLE)
        produce_orders(orders, 0, 20_000)
        produce_orders(broken, 0, 10)
        lake_table(server, broken.path).catalog.drop_table(("shop", "broken"))

        with TieringJob(TieringOptions(server.address), spark=spark) as job:
            endpoint = MetricsEndpoint(job.metrics.registry, "127.0.0.1", 0)
            try:
                capfd.readouterr()
                # The round is held at its Iceberg commit (its files written) while the endpoint is scraped.
                at_commit, resume = threading.Event(), threading.Event()
                commit_files = tiering_job.commit_files

                def held_commit(*args: Any, **kwargs: Any) -> Any:
                    at_commit.set()
                    resume.wait(120)
                    return commit_files(*args, **kwargs)

                monkeypatch.setattr(tiering_job, "commit_files", held_commit)
                round_thread = threading.Thread(target=job.run_round)
                round_thread.start()
                assert at_commit.wait(120), "the round never reached its commit"
                during = scrape(endpoint.url)  # the endpoint answers while a round runs
                resume.set()
                round_thread.join()
                assert during[("lakelog_build_info", (("version", __version__),))] == 1
                assert ("lakelog_tiering_round_duration_seconds_count", ()) not in during or (
                    during[("lakelog_tiering_round_duration_seconds_count", ())] == 0
                ), "scraped mid-round: no round has ended yet"
                before = time.time()
                after = scrape(endpoint.url)
                scraped_by = time.time()
            finally:
                endpoint.close()
        newest_ms = max(o.log_max_timestamp for o in conn.admin.get_lake_snapshot(orders.path).bucket_offsets.values())

    orders_label = (("table", "shop.orders"),)
    assert after[("lakelog_tiering_rounds_total", (("outcome", "ok"),))] == 1
    assert after[("lakelog_tiering_round_duration_seconds_count", ())] == 1
    assert after[("lakelog_tiering_records_total", orders_label)] == 20_000
    assert after[("lakelog_tiering_bytes_total", orders_label)] > 0
    assert after[("lakelog_tiering_snapshots_total", orders_label)] == 1
    assert after[("lakelog_tiering_table_failures_total", (("table", "shop.broken"),))] == 1
    assert after[("lakelog_tiering_last_round_timestamp_seconds", ())] <= scraped_by
    lag = after[("lakelog_tiering_lake_lag_seconds", orders_label)]
    assert before - newest_ms / 1000 <= lag <= scraped_by - newest_ms / 1000, "now minus the newest record the lake holds"

    err = capfd.readouterr().err
    assert "lakelog tier (round 1): shop.orders: 20,000 records to tier in" in err
    assert "shop.orders: tiered 20000 records (" in caplog.text, "each table's commit: records and bytes"
    assert "lakelog tier (round 1): 20,000/20,000 records (" in err, "the round's last progress line"


def test_lakelog_tier_serves_metrics_until_stopped(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        produce_orders(create_table(conn, properties=LAKE_TABLE), 0, 5_000)
    command = [
        sys.executable, "-m", "lakelog", "tier", "--bootstrap", server.address, "--interval", "1s",
        "--metrics-port", "0", "--spark-master", "local[1]",
    ]
    job = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    first_round = threading.Event()

    def read_stderr() -> None:
        assert job.stderr is not None
        for line in job.stderr:
            lines.append(line)
            if line.startswith("lakelog tier: round 1:"):
                first_round.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert first_round.wait(240), "".join(lines)
        url = next(line.split(" at ")[1].strip() for line in lines if line.startswith("lakelog tier: metrics at "))
        samples = scrape(url)
        assert samples[("lakelog_tiering_records_total", (("table", "shop.orders"),))] == 5_000
        assert samples[("lakelog_tiering_rounds_total", (("outcome", "ok"),))] >= 1
    finally:
        job.send_signal(signal.SIGTERM)
        code = job.wait(120)
        reader.join(10)
    assert code == 0, "".join(lines)
    spark_info = [line for line in lines if " INFO " in line and ("org.apache" in line or "Spark" in line)]
    assert not spark_info, f"Spark's INFO lines reach the console: {spark_info[:3]}"
