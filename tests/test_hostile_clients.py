"""Hostile clients cannot stall a tablet server or grow its memory without bound (issue 15).

A real server process on loopback gets 200 idle long polls and 60 FetchLog streams of 8 MiB
answers from raw HTTP/2 connections that never read (bench/hostile_clients.py builds that load;
bench 9 times the control RPCs under it). Meanwhile every control call must answer within its
deadline and produce must go on; once the hostile clients leave, what was produced reads back
exact (the answer budget they held came back), and the server's peak RSS stayed under the bound
the README states: its RSS before the load plus 3 x ``server.fetch.max-inflight-bytes`` plus 150 MB.
"""

from __future__ import annotations

import time
from pathlib import Path

import lakelog
from bench.hostile_clients import ControlClient, HostileLoad, peak_rss_mb, prepare_tables
from tests.conftest import ServerSubprocess, create_table, order_rows, scan_all

BUDGET_MB = 64
IDLE_POLLS = 200
NEVER_READ_STREAMS = 60
CALL_DEADLINE_S = 5.0
CONTROL_CALLS = 100
PRODUCED = 5_000


def rss_bound_mb(before_mb: float) -> float:
    return before_mb + 3 * BUDGET_MB + 150


def test_control_rpcs_and_produce_go_on_under_hostile_clients_and_memory_stays_bounded(tmp_path: Path) -> None:
    server = ServerSubprocess(tmp_path / "data", "--set", f"server.fetch.max-inflight-bytes={BUDGET_MB}mb").start()
    assert server.proc is not None
    try:
        with lakelog.connect(server.address) as conn:
            idle, big = prepare_tables(conn, 10_000)
            orders = create_table(conn)
            before_mb = peak_rss_mb(server.proc.pid)
            control = ControlClient(server.address)
            with HostileLoad(server.address, idle.info.table_id, big.info.table_id, IDLE_POLLS, NEVER_READ_STREAMS) as load:
                time.sleep(2)  # the streams fill the answer budget and the socket buffers
                answered = control.timed_calls(CONTROL_CALLS, CALL_DEADLINE_S)  # a call past its deadline raises
                writer = orders.new_append().create_writer()
                for start in range(0, PRODUCED, 1000):
                    writer.append_arrow(order_rows(start, 1000))
                    writer.flush()
                answered += control.timed_calls(CONTROL_CALLS, CALL_DEADLINE_S)
                assert load.poll_answers == 0, "the idle long polls were answered: they did not wait"
                peak_mb = peak_rss_mb(server.proc.pid)
            control.close()
            assert len(answered) == 2 * CONTROL_CALLS
            assert sum(conn.admin.list_offsets(orders.path).values()) == PRODUCED
            with orders.new_scan().create_log_scanner() as scanner:
                scanner.subscribe(0, 0)
                rows = scan_all(scanner, PRODUCED)
            assert rows.column("id").to_pylist() == list(range(PRODUCED))
            assert rows.column("__offset").to_pylist() == list(range(PRODUCED))
            # The big table reads back too: the never-read answers gave their budget back.
            with big.new_scan().project(["id"]).create_log_scanner() as scanner:
                scanner.subscribe(0, 0)
                assert scan_all(scanner, 10_000).column("id").to_pylist() == list(range(10_000))
        assert peak_mb < rss_bound_mb(before_mb), f"server peak RSS {peak_mb:.0f} MB, {before_mb:.0f} MB before the load"
    finally:
        server.stop()
