"""Acknowledged records survive kill -9; torn tails are cut on restart; corruption is reported, not served."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from tests.harness.server_subprocess import ServerSubprocess
from tests.harness.tables import create_table, order_rows, scan_all


def segment_files(data_dir: Path, bucket: int) -> list[Path]:
    return sorted((data_dir / "tablet-server" / "log").glob(f"*/{bucket}/*.log"))


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_sigkill_under_concurrent_produce_loses_no_acknowledged_record(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    server = ServerSubprocess(tmp_path / "data").start()
    acked: list[int] = []
    failed = threading.Event()

    def producer(first_id: int) -> None:
        # The server stays down: each writer retries for its delivery timeout, then fails.
        with lakelog.connect(server.address, {"client.request-timeout": "5s", "client.writer.delivery-timeout": "5s"}) as conn:
            writer = conn.get_table(lakelog.TablePath("shop", "orders")).new_append().create_writer()
            next_id = first_id
            try:
                while True:
                    count = rng.randint(1, 300)
                    writer.append_arrow(order_rows(next_id, count))
                    writer.flush()
                    acked.extend(range(next_id, next_id + count))
                    next_id += count
            except lakelog.LakelogError:
                failed.set()

    try:
        with lakelog.connect(server.address) as conn:
            create_table(conn, buckets=4)
        threads = [threading.Thread(target=producer, args=(n * 10_000_000,)) for n in range(3)]
        for thread in threads:
            thread.start()
        while len(acked) < rng.randint(2_000, 20_000):
            threading.Event().wait(0.01)
        server.kill()
        for thread in threads:
            thread.join(30)
        assert failed.is_set()
        survived = sorted(acked)
        server = ServerSubprocess(tmp_path / "data").start()
        with lakelog.connect(server.address) as conn:
            table = conn.get_table(lakelog.TablePath("shop", "orders"))
            total = sum(conn.admin.list_offsets(table.path).values())
            assert total >= len(survived)
            scanner = table.new_scan().create_log_scanner()
            scanner.subscribe_from_beginning()
            log = scan_all(scanner, total)
            ids = log.column("id").to_pylist()
            assert len(ids) == len(set(ids)) == total, "no record stored twice"
            assert set(survived) <= set(ids), "every acknowledged record survived"
            for bucket in range(4):
                offsets = log.filter(pa.compute.equal(log.column("__bucket"), bucket)).column("__offset").to_pylist()
                assert offsets == list(range(len(offsets)))
            writer = table.new_append().create_writer()
            writer.append_arrow(order_rows(-100, 10))
            writer.flush()
            assert sum(conn.admin.list_offsets(table.path).values()) == total + 10
    finally:
        server.stop()


def test_restart_truncates_a_torn_tail(tmp_path: Path) -> None:
    server = ServerSubprocess(tmp_path / "data").start()
    try:
        with lakelog.connect(server.address) as conn:
            table = create_table(conn)
            writer = table.new_append().create_writer()
            for start in range(0, 500, 50):
                writer.append_arrow(order_rows(start, 50))
                writer.flush()
        server.kill()
        active = segment_files(tmp_path / "data", 0)[-1]
        whole = active.read_bytes()
        with active.open("ab") as f:
            f.write(whole[: len(whole) // 20])
        server = ServerSubprocess(tmp_path / "data").start()
        with lakelog.connect(server.address) as conn:
            table = conn.get_table(lakelog.TablePath("shop", "orders"))
            assert conn.admin.list_offsets(table.path)[0] == 500
            writer = table.new_append().create_writer()
            writer.append_arrow(order_rows(500, 5))
            writer.flush()
            scanner = table.new_scan().create_log_scanner()
            scanner.subscribe(0, 0)
            log = scan_all(scanner, 505)
            assert log.column("id").to_pylist() == list(range(505))
            assert log.column("__offset").to_pylist() == list(range(505))
    finally:
        server.stop()


def test_a_byte_damaged_after_it_was_appended_is_still_a_crc_error_for_the_reader(server_factory, tmp_path: Path) -> None:
    """The server checks a batch's CRC once per process (at append, or on its first read of a
    segment found at startup) and trusts it afterwards, as Kafka's broker does; a batch damaged on
    disk while the server runs is then caught by the client's own check, naming bucket and offset,
    and the scanner's position stops at the last record it returned."""
    data_dir = tmp_path / "data"
    server = server_factory(data_dir)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, buckets=1)
        with table.new_append().create_writer() as writer:
            for start in range(0, 400, 100):
                writer.append_arrow(order_rows(start, 100), bucket=0)
                writer.flush()
        first = table.new_scan().create_log_scanner()
        first.subscribe(0, 0)
        assert scan_all(first, 400).column("__offset").to_pylist() == list(range(400)), "read once: every batch checked"
        segment = segment_files(data_dir, 0)[0]
        data = segment.read_bytes()
        with open(segment, "r+b") as file:  # in place: the server's descriptor and page cache see it
            file.seek(len(data) // 2 + 40)
            file.write(bytes([data[len(data) // 2 + 40] ^ 0xFF]))
        broken = table.new_scan().create_log_scanner()
        broken.subscribe(0, 0)
        polled: list[pa.Table] = []
        with pytest.raises(lakelog.CorruptRecordError) as info:
            for _ in range(20):
                polled.append(broken.poll_arrow(timeout_ms=500))
        message = str(info.value)
        assert "bucket 0" in message and "CRC" in message and "offset 200" in message
        returned = sum(t.num_rows for t in polled)
        assert returned <= 200 and broken.positions() == {0: returned}


@pytest.mark.parametrize("crashed", [False, True], ids=["clean-stop", "crash"])
def test_corrupted_byte_gives_crc_error_for_that_bucket_while_others_serve(
    server_factory, tmp_path: Path, crashed: bool
) -> None:
    """After a crash, recovery validates the segment: a bad batch followed by good ones is disk
    corruption, not a torn write, so it is kept (and reported on read) rather than truncating the
    acknowledged records after it."""
    data_dir = tmp_path / "data"
    first = server_factory(data_dir)
    with lakelog.connect(first.address) as conn:
        table = create_table(conn, buckets=2)
        writer = table.new_append().create_writer()
        for start in range(0, 400, 100):
            for bucket in (0, 1):
                writer.append_arrow(order_rows(start, 100), bucket=bucket)
            writer.flush()
    first.stop()
    segment = segment_files(data_dir, 0)[0]
    data = bytearray(segment.read_bytes())
    third_batch = len(data) // 2 + 40
    data[third_batch] ^= 0xFF
    segment.write_bytes(bytes(data))
    if crashed:
        for marker in (data_dir / "tablet-server" / "log").glob("*/*/.clean-shutdown"):
            marker.unlink()

    second = server_factory(data_dir)
    with lakelog.connect(second.address) as conn:
        table = conn.get_table(lakelog.TablePath("shop", "orders"))
        healthy = table.new_scan().create_log_scanner()
        healthy.subscribe(1, 0)
        assert scan_all(healthy, 400).column("__offset").to_pylist() == list(range(400))

        broken = table.new_scan().create_log_scanner()
        broken.subscribe(0, 0)
        with pytest.raises(lakelog.CorruptRecordError) as info:
            for _ in range(20):
                broken.poll(timeout_ms=500)
        message = str(info.value)
        assert "bucket 0" in message and "CRC" in message and "offset 200" in message
        assert segment.name in message

        after = table.new_scan().create_log_scanner()
        after.subscribe(0, 300)
        assert scan_all(after, 100).column("__offset").to_pylist() == list(range(300, 400))
        again = table.new_scan().create_log_scanner()
        again.subscribe(1, 0)
        assert scan_all(again, 400).num_rows == 400
