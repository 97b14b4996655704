"""The idempotent writer: a batch resent after its answer was lost is appended once, and its
writer gets the original offsets back; sequences out of order are refused by name; the state
survives a restart (rebuilt from the batch headers); a batch that cannot be delivered in time
fails naming its table, bucket and records, and the bucket goes on in a new epoch."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import DeliveryTimeoutError, OutOfOrderSequenceError
from lakelog.record.batch import encode_batch
from lakelog.server.log.log_tablet import LogConfig, LogTablet
from lakelog.server.server_process import ServerProcess
from tests.harness.s3 import TcpProxy
from tests.harness.tables import create_table, order_rows, scan_all
from tests.harness.waiting import wait_until

NAME = "shop.orders bucket 0"


def writer_batch(first: int, rows: int, writer: tuple[int, int, int]) -> bytes:
    return encode_batch(pa.record_batch({"id": pa.array(range(first, first + rows), pa.int64())}), 1, writer=writer)


def test_the_log_appends_a_resent_batch_once_and_answers_its_original_offsets(tmp_path: Path) -> None:
    log = LogTablet.open(tmp_path, LogConfig(), 0, NAME)
    first = log.append(writer_batch(0, 3, (7, 0, 0)))
    other = log.append(encode_batch(pa.record_batch({"id": pa.array([99], pa.int64())}), 1))
    again = log.append(writer_batch(0, 3, (7, 0, 0)))
    assert (again.base_offset, again.next_offset, again.commit_timestamp) == (first.base_offset, first.next_offset, first.commit_timestamp)
    assert again.duplicate and not first.duplicate
    assert log.log_end_offset == other.next_offset == 4
    log.close()

    reopened = LogTablet.open(tmp_path, LogConfig(), 0, NAME)
    after_restart = reopened.append(writer_batch(0, 3, (7, 0, 0)))
    assert after_restart.duplicate and (after_restart.base_offset, after_restart.next_offset) == (0, 3)
    assert reopened.append(writer_batch(3, 2, (7, 0, 1))).base_offset == 4
    assert reopened.log_end_offset == 6
    reopened.close()


def test_a_gap_or_an_old_epoch_is_refused_by_name_and_a_new_epoch_starts_at_zero(tmp_path: Path) -> None:
    log = LogTablet.open(tmp_path, LogConfig(), 0, NAME)
    log.append(writer_batch(0, 1, (7, 0, 0)))
    with pytest.raises(OutOfOrderSequenceError, match=r"shop.orders bucket 0: writer 7 epoch 0 sent sequence 2, expected 1"):
        log.append(writer_batch(1, 1, (7, 0, 2)))
    with pytest.raises(OutOfOrderSequenceError, match="opened epoch 1 at sequence 3, not 0"):
        log.append(writer_batch(1, 1, (7, 1, 3)))
    assert log.append(writer_batch(1, 1, (7, 1, 0))).base_offset == 1
    with pytest.raises(OutOfOrderSequenceError, match="epoch 0, older than epoch 1"):
        log.append(writer_batch(2, 1, (7, 0, 1)))
    assert log.log_end_offset == 2
    log.close()


# ---------------------------------------------------------------- through a real cluster


class Cluster:
    """A coordinator and one tablet server apart, the tablet server reached through a proxy."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.coordinator = ServerProcess({"data.dir": str(tmp_path / "c"), "server.port": 0}, ("coordinator",)).start()
        self.proxy: TcpProxy | None = None
        self.tablet = self._start_tablet()

    def _start_tablet(self) -> ServerProcess:
        conf = {
            "data.dir": str(self.tmp_path / "t"),
            "server.port": 0,
            "coordinator.address": self.coordinator.address,
            "tablet-server.id": 1,
            "tablet-server.heartbeat.interval": "100ms",
        }
        if self.proxy is not None:
            conf["server.advertised-port"] = self.proxy.port
        tablet = ServerProcess(conf, ("tablet-server",))
        if self.proxy is None:
            # The proxy needs the port the server binds, the server its proxy's port: bind first.
            tablet.start()
            self.proxy = TcpProxy(tablet.port)
            tablet.stop(0)
            return self._start_tablet()
        tablet.start()
        self.proxy.target_port = tablet.port
        return tablet

    def restart_tablet(self) -> None:
        self.tablet.stop(0)
        self.tablet = self._start_tablet()

    def high_watermark(self, table: lakelog.Table) -> int:
        log = self.tablet.tablet.logs.get(table.info.table_id, 0) if self.tablet.tablet else None
        return log.high_watermark if log is not None else 0

    def close(self) -> None:
        self.tablet.stop(0)
        self.coordinator.stop(0)
        if self.proxy is not None:
            self.proxy.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    started = Cluster(tmp_path)
    yield started
    started.close()


def flush_in_background(writer: lakelog.AppendWriter) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def flush() -> None:
        try:
            writer.flush()
        except BaseException as error:  # the test asserts there was none
            errors.append(error)

    thread = threading.Thread(target=flush)
    thread.start()
    return thread, errors


def lose_the_answer(cluster: Cluster, table: lakelog.Table, writer: lakelog.AppendWriter, appended: int, restart: bool) -> list[BaseException]:
    """Append ``appended`` rows so the server stores them but its answer never arrives; then break
    the connection (and, with ``restart``, restart the tablet server) and let the writer retry."""
    assert cluster.proxy is not None
    cluster.proxy.swallow_answers.set()
    writer.append_arrow(order_rows(0, appended))
    thread, errors = flush_in_background(writer)
    wait_until(lambda: cluster.high_watermark(table) == appended, "the batch appended on the server")
    cluster.proxy.cut()
    if restart:
        cluster.restart_tablet()
    cluster.proxy.swallow_answers.clear()
    cluster.proxy.restore()
    thread.join(60)
    assert not thread.is_alive()
    return errors


@pytest.mark.parametrize("restart", [False, True], ids=["connection-cut", "server-restarted"])
def test_a_retried_batch_that_had_been_appended_is_not_appended_twice(
    cluster: Cluster, restart: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="lakelog.server.log.log_tablet")
    acks: list[Any] = []
    with lakelog.connect(cluster.coordinator.address) as conn:
        table = create_table(conn)
        with table.new_append().create_writer(on_ack=acks.append) as writer:
            errors = lose_the_answer(cluster, table, writer, 50, restart)
            assert errors == []
            assert writer.delivery_stats.retried_batches >= 1
            writer.append_arrow(order_rows(50, 10))
        assert [(ack.base_offset, ack.record_count) for ack in acks] == [(0, 50), (50, 10)]
        assert any("answered without appending" in record.getMessage() for record in caplog.records)
        scanner = table.new_scan().create_log_scanner()
        scanner.subscribe_from_beginning()
        rows = scan_all(scanner, 60)
        assert conn.admin.list_offsets(table.path, spec=lakelog.OffsetSpec.latest()) == {0: 60}
        assert rows.column("id").to_pylist() == list(range(60))
        assert rows.column("__offset").to_pylist() == list(range(60))
    # The server counts what it appended, not what was resent to it (a restarted one counts from 0).
    produced = cluster.tablet.metrics.registry.get_sample_value("lakelog_produce_records_total", {"table": str(table.path)})
    assert produced == (10 if restart else 60)


def test_a_batch_not_delivered_in_time_fails_by_table_bucket_and_records_and_the_writer_goes_on(cluster: Cluster) -> None:
    assert cluster.proxy is not None
    # Three seconds: after restore() the channel reconnects within its 1 s backoff cap (plus jitter),
    # and the batch appended then must still be inside its delivery timeout.
    config = {"client.writer.delivery-timeout": "3s", "client.request-timeout": "500ms"}
    with lakelog.connect(cluster.coordinator.address, config=config) as conn:
        table = create_table(conn)
        writer = table.new_append().create_writer()
        writer.append_arrow(order_rows(0, 5))
        writer.flush()
        cluster.proxy.cut()
        writer.append_arrow(order_rows(5, 7))
        with pytest.raises(DeliveryTimeoutError, match=r"7 record\(s\) of shop.orders bucket 0 were not delivered within client.writer.delivery-timeout") as raised:
            writer.flush()
        assert (raised.value.bucket, raised.value.records) == (0, 7)
        assert writer.delivery_stats.failed_batches == 1
        cluster.proxy.restore()
        writer.append_arrow(order_rows(12, 3))
        writer.close()
        scanner = table.new_scan().create_log_scanner()
        scanner.subscribe_from_beginning()
        assert scan_all(scanner, 8).column("id").to_pylist() == [0, 1, 2, 3, 4, 12, 13, 14]


def test_writer_ids_are_never_handed_out_twice_across_coordinator_restarts(tmp_path: Path) -> None:
    first = ServerProcess({"data.dir": str(tmp_path / "c"), "server.port": 0}, ("coordinator",)).start()
    try:
        with lakelog.connect(first.address) as conn:
            before = [conn.internal_admin.init_writer().writer_id for _ in range(3)]
    finally:
        first.stop(0)
    again = ServerProcess({"data.dir": str(tmp_path / "c"), "server.port": 0}, ("coordinator",)).start()
    try:
        with lakelog.connect(again.address) as conn:
            after = conn.internal_admin.init_writer().writer_id
    finally:
        again.stop(0)
    assert before == sorted(set(before)) and before[0] > 0 and after > before[-1]
