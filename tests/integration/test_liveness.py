"""Tablet server liveness: a coordinator with two tablet servers apart; one stops heartbeating and
comes back. The coordinator says so once each way, in its metrics and in the metadata clients get;
describe shows the healthy buckets and marks the rest; the client reaches the restarted server."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import lakelog
from lakelog.cli.main import main
from tests.harness.metrics_scrape import Scrape
from tests.harness.server_roles import coordinator_apart, tablet_server
from tests.harness.tables import create_table, order_rows, scan_all
from tests.harness.waiting import wait_until


def test_a_silent_tablet_server_is_down_and_its_buckets_unavailable_until_it_returns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="lakelog.server.coordinator.tablet_liveness")
    coordinator = coordinator_apart(tmp_path)
    tablets = {i: tablet_server(tmp_path, coordinator, i) for i in (1, 2)}
    try:
        with lakelog.connect(coordinator.address) as conn:
            table = create_table(conn, buckets=4)
            with table.new_append().create_writer() as writer:
                for bucket in range(4):
                    writer.append_arrow(order_rows(bucket * 100, 100), bucket=bucket)
            leaders = {bucket: b.leader for bucket, b in conn.admin.describe_buckets(table.path).items()}
            assert set(leaders.values()) == {1, 2}
            assert Scrape(coordinator)("lakelog_tablet_server_up", server_id="2") == 1

            tablets[2].stop(0)
            wait_until(lambda: Scrape(coordinator)("lakelog_tablet_server_up", server_id="2") == 0, "server 2 reported down")
            wait_until(lambda: any("tablet server 2 is down" in r.getMessage() for r in caplog.records), "the coordinator saying server 2 is down")
            described = wait_until(
                lambda: (d := conn.admin.describe_buckets(table.path)) and not any(d[b].leader_available for b in d if leaders[b] == 2) and d,
                "buckets of server 2 described as unavailable",
            )
            for bucket, info in described.items():
                if leaders[bucket] == 1:
                    assert info.leader_available and info.high_watermark == 100
                else:
                    assert info == lakelog.BucketInfo.unavailable(2)
            assert Scrape(coordinator)("lakelog_tablet_server_up", server_id="1") == 1

            capsys.readouterr()
            assert main(["table", "describe", str(table.path), "--bootstrap", coordinator.address]) == 0
            out = capsys.readouterr().out
            assert "2 (unavailable)" in out and "2 of 4 buckets unavailable: tablet server(s) 2 down" in out

            tablets[2] = tablet_server(tmp_path, coordinator, 2)
            wait_until(lambda: Scrape(coordinator)("lakelog_tablet_server_up", server_id="2") == 1, "server 2 back")
            wait_until(lambda: any("tablet server 2 is back" in r.getMessage() for r in caplog.records), "the coordinator saying server 2 is back")
            downs = [r for r in caplog.records if "tablet server 2 is down" in r.getMessage()]
            assert len(downs) == 1 and downs[0].levelno == logging.WARNING

            assert all(b.leader_available for b in conn.admin.describe_buckets(table.path).values())
            with table.new_append().create_writer() as writer:
                for bucket in range(4):
                    writer.append_arrow(order_rows(400 + bucket * 100, 100), bucket=bucket)
            scanner = table.new_scan().create_log_scanner()
            scanner.subscribe_from_beginning()
            assert sorted(scan_all(scanner, 800).column("id").to_pylist()) == list(range(800))
    finally:
        for process in [*tablets.values(), coordinator]:
            process.stop(0)
