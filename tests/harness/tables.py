"""The tests' table of orders: its schema, rows, a table made of it, and reading a table whole."""

from __future__ import annotations

import time

import pyarrow as pa

import lakelog
from lakelog.record.meta_columns import with_meta_fields

ORDERS_SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])


def create_table(
    conn: lakelog.Connection,
    name: str = "orders",
    schema: pa.Schema = ORDERS_SCHEMA,
    buckets: int = 1,
    properties: dict[str, str] | None = None,
) -> lakelog.Table:
    path = lakelog.TablePath("shop", name)
    conn.admin.create_database("shop", ignore_if_exists=True)
    conn.admin.create_table(path, lakelog.TableDescriptor(schema, buckets, properties or {}))
    return conn.get_table(path)


def order_rows(start: int, count: int) -> pa.RecordBatch:
    ids = list(range(start, start + count))
    return pa.record_batch(
        [pa.array(ids, pa.int64()), pa.array([f"n{i}" for i in ids]), pa.array([i * 0.5 for i in ids])],
        schema=ORDERS_SCHEMA,
    )


def scan_all(scanner: lakelog.LogScanner, expected: int, timeout_s: float = 60.0) -> pa.Table:
    """Poll until at least ``expected`` records arrived (or fail after ``timeout_s``); everything
    polled, as one table (a partitioned table's with ``__partition_id``). With ``expected == 0``: an
    empty table of the scanner's columns."""
    tables: list[pa.Table] = []
    got = 0
    deadline = time.monotonic() + timeout_s
    while got < expected:
        assert time.monotonic() < deadline, f"only {got} of {expected} records arrived"
        table = scanner.poll_arrow(timeout_ms=500)
        if table.num_rows:
            tables.append(table)
            got += table.num_rows
    return pa.concat_tables(tables) if tables else with_meta_fields(scanner.schema).empty_table()


def produce_orders(table: lakelog.Table, start: int, count: int, batch: int = 2000) -> None:
    writer = table.new_append().create_writer()
    for first in range(start, start + count, batch):
        writer.append_arrow(order_rows(first, min(batch, start + count - first)))
    writer.flush()


def log_rows(address: str, path: lakelog.TablePath) -> pa.Table:
    """Every record of the log up to the high watermarks, read without the lake, by bucket and offset."""
    with lakelog.connect(address, {"client.lake.enabled": "false"}) as conn:
        total = sum(conn.admin.list_offsets(path).values())
        with conn.get_table(path).new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            rows = scan_all(scanner, total)
    return rows.sort_by([("__bucket", "ascending"), ("__offset", "ascending")])
