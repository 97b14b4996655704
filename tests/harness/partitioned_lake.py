"""A day-partitioned lake table: its settings, rows written per day, and reading exactly what it holds."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa

import lakelog
from tests.harness.tables import scan_all

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("page", pa.string())])
BUCKETS = 2
ROWS = 6000  # per partition and write: several 64 KiB segments per bucket
RETENTION = {
    "table.auto-partition.enabled": "true",
    "table.auto-partition.time-unit": "day",
    "table.auto-partition.num-precreate": "1",
    "table.auto-partition.num-retention": "2",
    "table.auto-partition.time-zone": "UTC",
}
LAKE = {"table.datalake.enabled": "true", "table.log.ttl": "1h", "table.log.tiered.local-segments": "1"}


def day_rows(day: str, first: int, count: int) -> pa.RecordBatch:
    ids = pa.array(range(first, first + count), pa.int64())
    pages = pa.array([f"/page/{os.urandom(24).hex()}" for _ in range(count)])  # random: batches do not compress away
    return pa.record_batch([ids, pa.array([day] * count), pages], schema=SCHEMA)


def write_days(table: lakelog.Table, days: list[str], first: int) -> None:
    with table.new_append().create_writer() as writer:
        for start in range(first, first + ROWS, 500):
            for day in days:
                writer.append_arrow(day_rows(day, start, 500))
            writer.flush()  # one batch per partition and round: several segments per bucket


def scan_exactly(scanner: Any, expected: int) -> pa.Table:
    """Exactly ``expected`` records: everything polled until they arrived, and nothing after."""
    rows = scan_all(scanner, expected, timeout_s=120.0)
    assert scanner.poll_arrow(timeout_ms=300).num_rows == 0, "more records than the log holds"
    return rows
