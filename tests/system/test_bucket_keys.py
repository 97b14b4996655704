"""Bucket keys and sticky buckets, on a real server: where the writer puts rows."""

from __future__ import annotations

import collections
import subprocess
import sys
import pyarrow as pa
import pytest

import lakelog
from lakelog.server.server_process import ServerProcess
from tests.harness.tables import scan_all

EVENTS = pa.schema([("user_id", pa.int64()), ("region", pa.string()), ("amount", pa.float64())])


def _table(conn: lakelog.Connection, name: str, buckets: int, bucket_keys: list[str]) -> lakelog.Table:
    path = lakelog.TablePath("shop", name)
    conn.admin.create_database("shop", ignore_if_exists=True)
    conn.admin.create_table(path, lakelog.TableDescriptor(EVENTS, buckets, bucket_keys=bucket_keys))
    return conn.get_table(path)


def _events(start: int, count: int, keys: int) -> pa.Table:
    ids = range(start, start + count)
    return pa.table(
        {"user_id": [i % keys for i in ids], "region": [f"r{i % 7}" for i in ids], "amount": [float(i) for i in ids]},
        schema=EVENTS,
    )


def _all_rows(table: lakelog.Table, expected: int) -> pa.Table:
    scanner = table.new_scan().create_log_scanner()
    scanner.subscribe_from_beginning()
    try:
        return scan_all(scanner, expected)
    finally:
        scanner.close()


def test_keys_stay_in_one_bucket_and_buckets_stay_even(conn: lakelog.Connection) -> None:
    table = _table(conn, "keyed", 8, ["user_id"])
    with table.new_append().create_writer() as writer:
        writer.append_arrow(_events(0, 90_000, 1000))
        for row in _events(90_000, 10_000, 1000).to_pylist():
            writer.append(row)
    rows = _all_rows(table, 100_000)
    assert rows.num_rows == 100_000
    buckets_of_key: dict[int, set[int]] = collections.defaultdict(set)
    per_bucket = collections.Counter()
    for user_id, bucket in zip(rows.column("user_id").to_pylist(), rows.column("__bucket").to_pylist()):
        buckets_of_key[user_id].add(bucket)
        per_bucket[bucket] += 1
    assert len(buckets_of_key) == 1000
    assert all(len(buckets) == 1 for buckets in buckets_of_key.values())
    mean = 100_000 / 8
    assert set(per_bucket) == set(range(8))
    assert max(per_bucket.values()) <= 1.5 * mean, per_bucket
    # A key's rows keep the order they were appended in (amount grows with the append order).
    amounts = collections.defaultdict(list)
    for user_id, amount in zip(rows.column("user_id").to_pylist(), rows.column("amount").to_pylist()):
        amounts[user_id].append(amount)
    assert all(values == sorted(values) for values in amounts.values())


def test_a_key_column_of_floats_is_refused(conn: lakelog.Connection) -> None:
    conn.admin.create_database("shop", ignore_if_exists=True)
    with pytest.raises(lakelog.InvalidTableError, match="amount"):
        conn.admin.create_table(lakelog.TablePath("shop", "bad"), lakelog.TableDescriptor(EVENTS, 4, bucket_keys=["amount"]))
    with pytest.raises(lakelog.InvalidTableError, match="nope"):
        conn.admin.create_table(lakelog.TablePath("shop", "bad"), lakelog.TableDescriptor(EVENTS, 4, bucket_keys=["nope"]))
    assert not conn.admin.table_exists(lakelog.TablePath("shop", "bad"))


def test_bucket_keys_are_stored_with_the_table(conn: lakelog.Connection) -> None:
    _table(conn, "stored", 4, ["region", "user_id"])
    info = conn.admin.get_table_info(lakelog.TablePath("shop", "stored"))
    assert info.bucket_keys == ("region", "user_id")
    assert info.descriptor.bucket_keys == ("region", "user_id")


def test_short_lived_unkeyed_writers_spread_over_all_buckets(server: ServerProcess, conn: lakelog.Connection) -> None:
    table = _table(conn, "unkeyed", 8, [])
    for writer_number in range(20):
        with lakelog.connect(server.address) as own, own.get_table(table.path).new_append().create_writer() as writer:
            for round_number in range(4):
                writer.append_arrow(_events(writer_number * 100 + round_number * 25, 25, 1000))
                writer.flush()
    rows = _all_rows(table, 2000)
    per_bucket = collections.Counter(rows.column("__bucket").to_pylist())
    assert set(per_bucket) == set(range(8)), per_bucket


WRITE_IN_ANOTHER_PROCESS = """
import sys, lakelog
with lakelog.connect(sys.argv[1]) as conn:
    table = conn.get_table(lakelog.TablePath("shop", "keyed2"))
    with table.new_append().create_writer() as writer:
        for user_id in range(50):
            writer.append({"user_id": user_id, "region": "x", "amount": 1.0})
"""


def test_same_key_same_bucket_across_processes(server: ServerProcess, conn: lakelog.Connection) -> None:
    table = _table(conn, "keyed2", 8, ["user_id"])
    with table.new_append().create_writer() as writer:
        for user_id in range(50):
            writer.append({"user_id": user_id, "region": "y", "amount": 0.0})
    subprocess.run([sys.executable, "-c", WRITE_IN_ANOTHER_PROCESS, server.address], check=True, timeout=120)
    rows = _all_rows(table, 100)
    buckets_of_key: dict[int, set[int]] = collections.defaultdict(set)
    for user_id, region, bucket in zip(
        rows.column("user_id").to_pylist(), rows.column("region").to_pylist(), rows.column("__bucket").to_pylist()
    ):
        buckets_of_key[user_id].add(bucket)
    assert set(rows.column("region").to_pylist()) == {"x", "y"}
    assert all(len(buckets) == 1 for buckets in buckets_of_key.values())
    assert len({b for buckets in buckets_of_key.values() for b in buckets}) > 1
