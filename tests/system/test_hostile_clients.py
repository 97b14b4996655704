"""Hostile clients cannot stall a tablet server or grow its memory without bound.

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
from bench.hostile_clients import STREAMS_PER_CONNECTION, ControlClient, HostileLoad, peak_rss_mb, prepare_tables
from lakelog.server.rpc.answer_budget import CONNECTION_SHARES
from tests.harness.metrics_scrape import metric_sum
from tests.harness.s3 import free_port
from tests.harness.server_subprocess import ServerSubprocess
from tests.harness.tables import create_table, order_rows, scan_all
from tests.harness.waiting import wait_until

BUDGET_MB = 64
IDLE_POLLS = 200
NEVER_READ_STREAMS = 60
CALL_DEADLINE_S = 10.0
CONTROL_CALLS = 100
PRODUCED = 5_000


def rss_bound_mb(before_mb: float) -> float:
    return before_mb + 3 * BUDGET_MB + 150


def _never_read_shares_held(metrics_port: int) -> bool:
    """Each connection of never-read streams holds its share of the budget (an answer of 8 MiB, less
    what did not fit in its share besides the answer's overhead)."""
    connections = -(-NEVER_READ_STREAMS // STREAMS_PER_CONNECTION)
    share = (BUDGET_MB << 20) // CONNECTION_SHARES
    return metric_sum(metrics_port, "lakelog_fetch_budget_bytes_in_use") >= connections * (share - (1 << 20))


def _budgeted_server(tmp_path: Path) -> tuple[ServerSubprocess, int]:
    """A server process with an answer budget of ``BUDGET_MB`` and its metrics on, and their port."""
    metrics_port = free_port()
    server = ServerSubprocess(
        tmp_path / "data", "--set", f"server.fetch.max-inflight-bytes={BUDGET_MB}mb", "--set", f"metrics.port={metrics_port}"
    ).start()
    return server, metrics_port


def _held_polls(metrics_port: int) -> float:
    """Fetches the server holds without a thread: parked for data, or waiting for answer budget
    (the never-read streams beyond the budget among them)."""
    return metric_sum(metrics_port, "lakelog_fetch_parked_polls") + metric_sum(metrics_port, "lakelog_fetch_budget_waiters")


def test_control_rpcs_and_produce_go_on_under_hostile_clients_and_memory_stays_bounded(tmp_path: Path) -> None:
    server, metrics_port = _budgeted_server(tmp_path)
    assert server.proc is not None
    try:
        with lakelog.connect(server.address) as conn:
            idle, big = prepare_tables(conn, 10_000)
            orders = create_table(conn)
            before_mb = peak_rss_mb(server.proc.pid)
            control = ControlClient(server.address)
            with HostileLoad(server.address, idle.info.table_id, big.info.table_id, IDLE_POLLS, NEVER_READ_STREAMS) as load:
                # The load is in place before it is measured: the never-read answers hold their
                # connections' shares of the budget, and every idle poll is held by the server
                # without a thread, parked or waiting for budget.
                wait_until(
                    lambda: _never_read_shares_held(metrics_port)
                    and metric_sum(metrics_port, "lakelog_fetch_budget_waiters") > 0
                    and _held_polls(metrics_port) >= IDLE_POLLS,
                    f"{IDLE_POLLS} polls held and the {BUDGET_MB} MB answer budget spent",
                )
                answered = control.timed_calls(CONTROL_CALLS, CALL_DEADLINE_S)  # a call past its deadline raises
                writer = orders.new_append().create_writer()
                for start in range(0, PRODUCED, 1000):
                    writer.append_arrow(order_rows(start, 1000))
                    writer.flush()
                answered += control.timed_calls(CONTROL_CALLS, CALL_DEADLINE_S)
                assert load.poll_answers == 0, "the idle long polls were answered: they did not wait"
                assert load.poll_failures == 0, "idle long polls failed under the load"
                assert _held_polls(metrics_port) >= IDLE_POLLS
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


def test_polls_past_max_parked_polls_are_answered_at_once_and_parked_ones_wake_on_data(server_factory) -> None:  # noqa: ANN001
    """``server.fetch.max-parked-polls`` = 5 and 10 long polls of 60 s: five park (the gauge says 5),
    five are answered at once, empty, and counted; a produce wakes the parked ones with its records;
    once every call ended, no answer budget is held."""
    import grpc

    from bench.hostile_clients import FETCH_METHOD, fetch_request
    from lakelog.rpc import lakelog_api_pb2 as pb

    server = server_factory(**{"server.fetch.max-parked-polls": 5})
    registry = server.metrics.registry
    with lakelog.connect(server.address) as conn:
        table = create_table(conn)
        request = fetch_request(table.info.table_id, 0, 1 << 20, 60_000).SerializeToString()
        with grpc.insecure_channel(server.address) as channel:
            fetch = channel.unary_unary(FETCH_METHOD, request_serializer=bytes, response_deserializer=pb.FetchLogResponse.FromString)
            polls = [fetch.future(request, timeout=120) for _ in range(10)]
            while registry.get_sample_value("lakelog_fetch_unparked_polls_total") < 5 or sum(p.done() for p in polls) < 5:
                time.sleep(0.01)
            answered_at_once = [poll for poll in polls if poll.done()]  # the parked ones wait up to 60 s
            assert len(answered_at_once) == 5
            assert registry.get_sample_value("lakelog_fetch_unparked_polls_total") == 5
            assert registry.get_sample_value("lakelog_fetch_parked_polls") == 5
            for poll in answered_at_once:
                (bucket,) = poll.result().tables_resp[0].buckets_resp
                assert bucket.records == b"" and bucket.high_watermark == 0
            writer = table.new_append().create_writer()
            writer.append_arrow(order_rows(0, 3))
            writer.flush()
            for poll in polls:
                if poll not in answered_at_once:
                    (bucket,) = poll.result(timeout=CALL_DEADLINE_S).tables_resp[0].buckets_resp
                    assert bucket.records and bucket.high_watermark == 3
        while registry.get_sample_value("lakelog_fetch_budget_bytes_in_use") != 0:
            time.sleep(0.01)
        assert registry.get_sample_value("lakelog_fetch_parked_polls") == 0


READER_DEADLINE_S = 20.0
READER_FETCHES = 5


def test_a_reader_is_served_while_never_read_streams_on_six_connections_hold_their_shares(tmp_path: Path) -> None:
    """60 never-read 8 MiB FetchLog streams on 6 connections, and on a seventh a client reading
    8 MiB answers one after the other: each arrives within its deadline, with records; the server's
    memory stays within the bound."""
    import grpc

    from bench.hostile_clients import FETCH_METHOD, STREAM_ANSWER_BYTES, fetch_request
    from lakelog.record.batch import iter_headers
    from lakelog.rpc import lakelog_api_pb2 as pb

    server, metrics_port = _budgeted_server(tmp_path)
    assert server.proc is not None
    try:
        with lakelog.connect(server.address) as conn:
            idle, big = prepare_tables(conn, 10_000)
            before_mb = peak_rss_mb(server.proc.pid)
            with HostileLoad(server.address, idle.info.table_id, big.info.table_id, 0, NEVER_READ_STREAMS):
                wait_until(
                    lambda: _never_read_shares_held(metrics_port) and metric_sum(metrics_port, "lakelog_fetch_budget_waiters") > 0,
                    "the never-read streams hold their shares of the budget, the rest of them waiting",
                )
                options = [("grpc.use_local_subchannel_pool", 1), ("grpc.max_receive_message_length", 2 * STREAM_ANSWER_BYTES)]
                with grpc.insecure_channel(server.address, options=options) as channel:
                    fetch = channel.unary_unary(FETCH_METHOD, request_serializer=bytes, response_deserializer=pb.FetchLogResponse.FromString)
                    request = fetch_request(big.info.table_id, 0, STREAM_ANSWER_BYTES, 0).SerializeToString()
                    for _ in range(READER_FETCHES):
                        (bucket,) = fetch(request, timeout=READER_DEADLINE_S).tables_resp[0].buckets_resp  # late: DEADLINE_EXCEEDED
                        assert bucket.error_code == 0, bucket.error_message
                        assert len(bucket.records) > STREAM_ANSWER_BYTES // 2
                        assert [h.base_offset for _, h in iter_headers(bucket.records)][0] == 0
                assert metric_sum(metrics_port, "lakelog_fetch_budget_waiters") > 0, "the never-read streams left"
                peak_mb = peak_rss_mb(server.proc.pid)
        assert peak_mb < rss_bound_mb(before_mb), f"server peak RSS {peak_mb:.0f} MB, {before_mb:.0f} MB before the load"
    finally:
        server.stop()
