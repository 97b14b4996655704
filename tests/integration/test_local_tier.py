"""The local tier end to end: produce through a real gRPC tablet server and read back with LogScanner."""

from __future__ import annotations

import threading
import time

import pyarrow as pa

import lakelog
from tests.harness.tables import ORDERS_SCHEMA, create_table, order_rows, scan_all

RECORDS = 100_000
BUCKETS = 4


def produce(table: lakelog.Table, total: int, per_batch: int = 1000) -> None:
    writer = table.new_append().create_writer()
    for start in range(0, total, per_batch):
        writer.append_arrow(order_rows(start, min(per_batch, total - start)))
    writer.flush()
    writer.close()


def assert_exact_log(table: pa.Table, buckets: int, total: int) -> None:
    """Every id exactly once, each bucket's offsets 0..n-1 in order."""
    assert table.num_rows == total
    assert sorted(table.column("id").to_pylist()) == list(range(total))
    for bucket in range(buckets):
        offsets = table.filter(pa.compute.equal(table.column("__bucket"), bucket)).column("__offset").to_pylist()
        assert offsets == list(range(len(offsets))), f"bucket {bucket} has a gap, a duplicate or disorder"


def test_100k_records_over_4_buckets_poll_arrow(conn: lakelog.Connection) -> None:
    table = create_table(conn, buckets=BUCKETS)
    produce(table, RECORDS)
    latest = conn.admin.list_offsets(table.path, spec=lakelog.OffsetSpec.latest())
    assert sum(latest.values()) == RECORDS and all(latest[b] > 0 for b in range(BUCKETS))
    scanner = table.new_scan().create_log_scanner()
    scanner.subscribe_from_beginning()
    result = scan_all(scanner, RECORDS)
    assert_exact_log(result, BUCKETS, RECORDS)
    values = result.select(["id", "name", "amount"]).sort_by("id")
    assert values.equals(pa.Table.from_batches([order_rows(0, RECORDS)])), "every value as produced"
    for bucket in range(BUCKETS):
        mine = result.filter(pa.compute.equal(result.column("__bucket"), bucket)).sort_by("__offset")
        ids = mine.column("id").to_pylist()
        assert ids == sorted(ids), f"bucket {bucket}: ids rise with the offset (appended in order)"
    assert scanner.poll(timeout_ms=200).to_arrow().num_rows == 0


def test_100k_records_poll_rows_in_offset_order(conn: lakelog.Connection) -> None:
    table = create_table(conn, buckets=BUCKETS)
    writer = table.new_append().create_writer()
    for i in range(RECORDS):
        writer.append({"id": i, "name": f"n{i}", "amount": i * 0.5})
    writer.flush()
    scanner = table.new_scan().create_log_scanner()
    scanner.subscribe_from_beginning()
    next_offset = {b: 0 for b in range(BUCKETS)}
    seen = set()
    deadline = time.monotonic() + 120
    while len(seen) < RECORDS:
        assert time.monotonic() < deadline
        for record in scanner.poll(timeout_ms=500):
            assert record.offset == next_offset[record.bucket]
            assert record.change_type == "+A"
            assert record.row == {"id": record.row["id"], "name": f"n{record.row['id']}", "amount": record.row["id"] * 0.5}
            next_offset[record.bucket] += 1
            assert record.row["id"] not in seen
            seen.add(record.row["id"])
    assert scanner.positions() == next_offset


def test_projection_returns_only_asked_columns(conn: lakelog.Connection) -> None:
    table = create_table(conn, buckets=2)
    produce(table, 5000)
    scanner = table.new_scan().project(["amount", "id"]).create_log_scanner()
    scanner.subscribe_from_beginning()
    result = scan_all(scanner, 5000)
    assert result.column_names == ["amount", "id", "__bucket", "__offset", "__timestamp"]
    assert all(a == i * 0.5 for a, i in zip(result.column("amount").to_pylist(), result.column("id").to_pylist()))
    records = table.new_scan().project(["name"]).create_log_scanner()
    records.subscribe(0, 0)
    first = next(iter(records.poll(timeout_ms=5000)))
    assert set(first.row) == {"name"}


def test_timestamp_lookup_boundaries(conn: lakelog.Connection) -> None:
    table = create_table(conn)
    writer = table.new_append().create_writer()
    for start in range(0, 50, 10):
        writer.append_arrow(order_rows(start, 10))
        writer.flush()
        time.sleep(0.02)
    scanner = table.new_scan().create_log_scanner()
    scanner.subscribe(0, 0)
    log = scan_all(scanner, 50)
    stamps = log.column("__timestamp").to_pylist()
    batch_ts = sorted(set(stamps))
    assert len(batch_ts) == 5

    def lookup(ms: int) -> int:
        return conn.admin.list_offsets(table.path, [0], lakelog.OffsetSpec.timestamp(ms))[0]

    for i, ts in enumerate(batch_ts):
        assert lookup(ts) == i * 10, "T equal to a batch's timestamp gives that batch's first offset"
    for i in range(4):
        between = (batch_ts[i] + batch_ts[i + 1]) // 2
        if batch_ts[i] < between < batch_ts[i + 1]:
            assert lookup(between) == (i + 1) * 10
        assert lookup(batch_ts[i] + 1) == (i + 1) * 10
    assert lookup(0) == 0, "before all: the first offset"
    assert lookup(batch_ts[-1] + 1) == 50, "after all: the latest offset"

    from_ts = table.new_scan().create_log_scanner()
    from_ts.subscribe_from_timestamp(batch_ts[2])
    assert scan_all(from_ts, 30).column("__offset").to_pylist() == list(range(20, 50))


def test_long_poll_returns_as_soon_as_data_arrives(conn: lakelog.Connection) -> None:
    table = create_table(conn)
    scanner = table.new_scan().create_log_scanner()
    scanner.subscribe(0, 0)
    assert len(scanner.poll(timeout_ms=300)) == 0

    def late_producer() -> None:
        time.sleep(0.5)
        writer = table.new_append().create_writer()
        writer.append({"id": 1, "name": "late", "amount": 1.0})
        writer.flush()

    producer = threading.Thread(target=late_producer)
    producer.start()
    timeout_s = 120
    started = time.monotonic()
    records = scanner.poll(timeout_ms=timeout_s * 1000)
    waited = time.monotonic() - started
    producer.join()
    assert [r.row["name"] for r in records] == ["late"]
    assert waited < timeout_s / 2, "the poll ended because data arrived, not because its timeout ran out"


def test_restart_keeps_tables_and_records(server_factory, tmp_path) -> None:
    data_dir = tmp_path / "restart"
    first = server_factory(data_dir)
    with lakelog.connect(first.address) as conn:
        table = create_table(conn, buckets=3)
        produce(table, 3000)
    first.stop()
    second = server_factory(data_dir)
    with lakelog.connect(second.address) as conn:
        assert conn.admin.list_tables("shop") == ["orders"]
        table = conn.get_table(lakelog.TablePath("shop", "orders"))
        assert table.info.buckets == 3 and table.schema.equals(ORDERS_SCHEMA)
        scanner = table.new_scan().create_log_scanner()
        scanner.subscribe_from_beginning()
        assert_exact_log(scan_all(scanner, 3000), 3, 3000)
        produce(table, 300)
        assert sum(conn.admin.list_offsets(table.path).values()) == 3300


def test_describe_buckets(conn: lakelog.Connection) -> None:
    table = create_table(conn, buckets=2)
    produce(table, 100)
    described = conn.admin.describe_buckets(table.path)
    assert set(described) == {0, 1}
    assert sum(info.high_watermark for info in described.values()) == 100
    assert all(info.local_log_start_offset == 0 and info.remote_log_start_offset == -1 for info in described.values())
    assert all(info.lake_log_end_offset == -1 for info in described.values())
