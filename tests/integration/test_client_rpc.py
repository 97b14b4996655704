"""The client's RPC edge: one retry policy and one leader router for every API, fetch answers that
say which offset they answer, and lake plugins found without ambiguity."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import grpc
import pytest

import lakelog
from lakelog.errors import (
    InvalidConfigError,
    LakeError,
    NetworkError,
    NoTabletServerError,
    NotLeaderError,
    RemoteStorageError,
    RequestTimeoutError,
    SchemaMismatchError,
    ServerUnreachableError,
)
from lakelog.lake_plugins import load_lake_storage
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceStub
from lakelog.server.server_process import ServerProcess
from lakelog.client.rpc.retry_policy import RetryPolicy
from tests.harness.server_roles import coordinator_apart, tablet_server
from tests.harness.tables import create_table, order_rows, scan_all


def test_routing_errors_are_always_retried_transport_errors_only_when_resending_is_safe() -> None:
    policy = RetryPolicy(backoff_s=0.1, max_backoff_s=1.0)
    for error in (NotLeaderError("moved"), NoTabletServerError("none yet"), ServerUnreachableError("refused")):
        assert policy.should_retry(error, resend_safe=False) and policy.should_retry(error, resend_safe=True)
    for error in (NetworkError("down"), RequestTimeoutError("slow")):
        assert policy.should_retry(error, resend_safe=True) and not policy.should_retry(error, resend_safe=False)
    for error in (RemoteStorageError("s3 away"), LakeError("catalog away"), SchemaMismatchError("bad row")):
        assert not policy.should_retry(error, resend_safe=True)


def test_backoff_doubles_is_jittered_over_its_upper_half_and_capped() -> None:
    policy = RetryPolicy(backoff_s=0.1, max_backoff_s=1.0)
    for attempt, ceiling in ((0, 0.1), (1, 0.2), (2, 0.4), (3, 0.8), (4, 1.0), (60, 1.0)):
        delays = {policy.delay_s(attempt) for _ in range(50)}
        assert all(ceiling / 2 <= d <= ceiling for d in delays), (attempt, sorted(delays)[:3])
        assert len(delays) > 1, "every client waiting the same time would retry in lockstep"


def test_every_api_follows_a_tablet_server_that_came_back_on_another_port(tmp_path: Path) -> None:
    """The client holds the old address; the first calls fail to connect, the router reloads the
    leaders from the coordinator and the lookup, the write and the poll succeed without an error."""
    coordinator = ServerProcess({"data.dir": str(tmp_path / "c"), "server.port": 0}, ("coordinator",)).start()
    tablet_conf = {"data.dir": str(tmp_path / "t"), "server.port": 0, "coordinator.address": coordinator.address}
    tablet = ServerProcess(tablet_conf, ("tablet-server",)).start()
    try:
        with lakelog.connect(coordinator.address) as conn:
            table = create_table(conn, buckets=2)
            with table.new_append().create_writer() as writer:
                writer.append_arrow(order_rows(0, 500))
            scanner = table.new_scan().create_log_scanner()
            scanner.subscribe_from_beginning()
            assert scan_all(scanner, 500).num_rows == 500
            old_address = tablet.address

            tablet.stop(0)
            tablet = ServerProcess(tablet_conf, ("tablet-server",)).start()
            assert tablet.address != old_address

            assert sum(conn.admin.list_offsets(table.path).values()) == 500
            assert {b.leader for b in conn.admin.describe_buckets(table.path).values()} == {tablet.tablet.server_id}
            with table.new_append().create_writer() as writer:
                writer.append_arrow(order_rows(500, 500))
            polled = scan_all(scanner, 500)
            assert sorted(polled.column("id").to_pylist()) == list(range(500, 1000))
    finally:
        tablet.stop(0)
        coordinator.stop(0)


def test_a_fetch_answer_names_the_offset_it_answers(conn: lakelog.Connection, server: ServerProcess) -> None:
    table = create_table(conn, buckets=2)
    with table.new_append().create_writer() as writer:
        writer.append_arrow(order_rows(0, 100), bucket=1)
    request = pb.FetchLogRequest(
        follower_server_id=-1,
        max_bytes=1 << 20,
        tables_req=[
            pb.PbFetchLogReqForTable(
                table_id=table.info.table_id,
                buckets_req=[
                    pb.PbFetchLogReqForBucket(bucket_id=0, fetch_offset=0, max_fetch_bytes=1 << 20),
                    pb.PbFetchLogReqForBucket(bucket_id=1, fetch_offset=37, max_fetch_bytes=1 << 20),
                ],
            )
        ],
    )
    with grpc.insecure_channel(server.address) as channel:
        response = TabletServiceStub(channel).FetchLog(request, timeout=10)
    answers = {item.bucket_id: item for item in response.tables_resp[0].buckets_resp}
    assert answers[0].fetch_offset == 0 and not answers[0].records
    assert answers[1].fetch_offset == 37 and answers[1].records


def _install_plugin(root: Path, name: str, lake_format: str, target: str) -> None:
    """A second distribution whose entry point claims ``lake_format``: what pip would leave behind."""
    dist = root / f"{name}-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[lakelog.lake_storage]\n{lake_format} = {target}\n")


def test_two_plugins_claiming_one_format_are_refused_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, server: ServerProcess
) -> None:
    _install_plugin(tmp_path, "other_iceberg", "iceberg", "other_iceberg.storage:OtherIceberg")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(InvalidConfigError) as refused:
        load_lake_storage("iceberg")
    assert "lakelog.lake.iceberg_lake_storage:IcebergLakeStorage" in str(refused.value)
    assert "other_iceberg.storage:OtherIceberg" in str(refused.value)

    lake_enabled = {"table.datalake.enabled": "true"}
    with lakelog.connect(server.address, {"client.lake.source": "iceberg-arrow"}) as conn:
        # The coordinator creates no lake table with either plugin, says why, and keeps serving.
        with pytest.raises(InvalidConfigError, match="other_iceberg.storage:OtherIceberg"):
            create_table(conn, buckets=1, properties=lake_enabled)
        assert conn.admin.list_tables("shop") == []

        sys.path.remove(str(tmp_path))
        table = create_table(conn, buckets=1, properties=lake_enabled)
        with table.new_append().create_writer() as writer:
            writer.append_arrow(order_rows(0, 10))

    sys.path.insert(0, str(tmp_path))
    with lakelog.connect(server.address, {"client.lake.source": "iceberg-arrow"}) as conn:
        # A client reads without the lake, saying once which plugins clash.
        with caplog.at_level(logging.WARNING, logger="lakelog.client.lake.lake_sources"):
            scanner = conn.get_table(table.path).new_scan().create_log_scanner()
            scanner.subscribe_from_beginning()
            assert sorted(scan_all(scanner, 10).column("id").to_pylist()) == list(range(10))
    assert "other_iceberg.storage:OtherIceberg" in caplog.text and "reading without the lake" in caplog.text


def test_any_live_bootstrap_address_will_do(server: ServerProcess) -> None:
    dead = "127.0.0.1:1"
    with lakelog.connect([dead, server.address]) as conn:
        conn.admin.create_database("shop")
        assert conn.admin.database_exists("shop") and not conn.admin.database_exists("nope")
    with lakelog.connect(config={"bootstrap.servers": f"{dead},{server.address}"}) as conn:
        table = create_table(conn, buckets=1)
        assert conn.admin.table_exists(table.path)
        assert not conn.admin.table_exists(lakelog.TablePath("shop", "missing"))
        assert not conn.admin.table_exists(lakelog.TablePath("nodb", "missing"))
    with pytest.raises(InvalidConfigError, match="'localhost' is not HOST:PORT"):
        lakelog.connect(f"{server.address},localhost")
    with pytest.raises(InvalidConfigError, match="no coordinator address"):
        lakelog.connect()


def test_a_poll_with_nothing_subscribed_says_what_is_missing(conn: lakelog.Connection) -> None:
    scanner = create_table(conn, buckets=2).new_scan().create_log_scanner()
    with pytest.raises(lakelog.InvalidRequestError, match="no bucket subscribed: call subscribe"):
        scanner.poll(timeout_ms=10)
    scanner.subscribe(1, 0)
    assert len(scanner.poll(timeout_ms=10)) == 0


def test_a_table_dropped_and_created_again_by_another_client_is_found_under_its_new_id(server: ServerProcess) -> None:
    """Ids are cached by name. A new handle looks the name up again, the admin asks again once a
    leader no longer knows the cached id, and a handle taken before the drop keeps naming the
    dropped table."""
    with lakelog.connect(server.address) as mine, lakelog.connect(server.address) as other:
        before = create_table(mine)
        stale_writer = before.new_append().create_writer()
        stale_writer.append_arrow(order_rows(0, 5))
        stale_writer.flush()
        assert mine.admin.list_offsets(before.path) == {0: 5}
        other.admin.drop_table(before.path)
        with create_table(other).new_append().create_writer() as writer:
            writer.append_arrow(order_rows(100, 3))
        assert mine.admin.list_offsets(before.path) == {0: 3}
        assert mine.admin.describe_buckets(before.path)[0].high_watermark == 3
        after = mine.get_table(before.path)
        assert after.info.table_id != before.info.table_id
        with after.new_append().create_writer() as writer:
            writer.append_arrow(order_rows(103, 2))
        scanner = after.new_scan().create_log_scanner()
        scanner.subscribe_from_beginning()
        assert scan_all(scanner, 5).column("id").to_pylist() == [100, 101, 102, 103, 104]
        stale = before.new_scan().create_log_scanner()
        stale.subscribe_from_beginning()
        # The server knows only that the id is gone; the error names the table the user read or wrote.
        gone = rf"^{before.path} bucket 0: .*id {before.info.table_id}$"
        with pytest.raises(lakelog.TableNotExistError, match=gone):
            stale.poll_arrow(timeout_ms=5000)
        stale_writer.append_arrow(order_rows(5, 1))
        with pytest.raises(lakelog.TableNotExistError, match=gone):
            stale_writer.flush()
        stale_writer.close()


def test_a_table_handle_is_had_from_what_the_connection_knows_while_the_coordinator_is_down(tmp_path: Path) -> None:
    coordinator = coordinator_apart(tmp_path)
    tablet = tablet_server(tmp_path, coordinator, 1)
    try:
        with lakelog.connect(coordinator.address, {"client.request-timeout": "2s"}) as conn:
            table = create_table(conn)
            with table.new_append().create_writer() as writer:
                writer.append_arrow(order_rows(0, 4))
            coordinator.stop(0)
            again = conn.get_table(table.path)
            assert again.info.table_id == table.info.table_id
            scanner = again.new_scan().create_log_scanner()
            scanner.subscribe_from_beginning()
            assert scan_all(scanner, 4).column("id").to_pylist() == [0, 1, 2, 3]
            with pytest.raises(ServerUnreachableError, match="coordinator"):
                conn.get_table(lakelog.TablePath("shop", "never_created"))
    finally:
        tablet.stop(0)
        coordinator.stop(0)
