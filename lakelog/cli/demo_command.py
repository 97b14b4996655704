"""`lakelog demo`: the README's main job, start to finish on the embedded default.

It starts an embedded server in a fresh directory, creates a table, produces records with a
progress line, reads every record back from offset 0, checks that none is missing, duplicated or
out of order, and answers a timestamp lookup. Later tiers (remote, lake) join this story as they land.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.client.connection import connect
from lakelog.logging_config import configure_logging
from lakelog.metadata import OffsetSpec, TableDescriptor, TablePath

SCHEMA = pa.schema([("order_id", pa.int64()), ("customer", pa.string()), ("amount", pa.float64())])
PATH = TablePath("demo", "orders")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("demo", help="Run the whole story on an embedded server and print what happened.")
    parser.add_argument("--records", type=int, default=1_000_000, help="records to produce (default 1,000,000)")
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--data-dir", help="keep the data here (default: a fresh temporary directory)")
    parser.set_defaults(handler=_run)


def _batch(start: int, count: int) -> pa.RecordBatch:
    ids = pa.array(range(start, start + count), pa.int64())
    customers = pc.binary_join_element_wise("customer-", pc.cast(pc.bit_wise_and(ids, 1023), pa.string()), "")
    amounts = pc.divide(pc.cast(pc.bit_wise_and(ids, 65535), pa.float64()), 100.0)
    return pa.record_batch([ids, customers, amounts], schema=SCHEMA)


def _progress(label: str, done: int, total: int, started: float) -> None:
    rate = done / max(time.monotonic() - started, 1e-9)
    print(f"\r{label}: {done:,}/{total:,} records ({rate:,.0f}/s)", end="", file=sys.stderr, flush=True)


def _run(args: argparse.Namespace) -> int:
    from lakelog.server.server_process import ServerProcess

    configure_logging("WARNING")
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="lakelog-demo-")
    with ServerProcess({"data.dir": data_dir, "server.port": 0}) as server:
        print(f"embedded lakelog server on {server.address}, data in {data_dir}")
        with connect(server.address) as conn:
            conn.admin.create_database(PATH.database, ignore_if_exists=True)
            conn.admin.create_table(PATH, TableDescriptor(SCHEMA, args.buckets), ignore_if_exists=True)
            table = conn.get_table(PATH)
            start_offsets = conn.admin.list_offsets(PATH)

            started = time.monotonic()
            with table.new_append().create_writer() as writer:
                for start in range(0, args.records, 50_000):
                    writer.append_arrow(_batch(start, min(50_000, args.records - start)))
                    _progress("produce", min(start + 50_000, args.records), args.records, started)
            print(file=sys.stderr)
            midpoint_ts = int(time.time() * 1000)

            scanner = table.new_scan().create_log_scanner()
            for bucket, offset in start_offsets.items():
                scanner.subscribe(bucket, offset)
            counts: dict[int, int] = {}
            next_offset = dict(start_offsets)
            started = time.monotonic()
            read = 0
            while read < args.records:
                polled = scanner.poll_arrow(timeout_ms=2000)
                if polled.num_rows == 0:
                    break
                for bucket_table in polled.group_by("__bucket").aggregate([("__offset", "min"), ("__offset", "max"), ("__offset", "count")]).to_pylist():
                    bucket = bucket_table["__bucket"]
                    if bucket_table["__offset_min"] != next_offset[bucket] or bucket_table["__offset_max"] - bucket_table["__offset_min"] + 1 != bucket_table["__offset_count"]:
                        print(f"\nbucket {bucket}: offsets not contiguous from {next_offset[bucket]}", file=sys.stderr)
                        return 1
                    next_offset[bucket] = bucket_table["__offset_max"] + 1
                    counts[bucket] = counts.get(bucket, 0) + bucket_table["__offset_count"]
                read += polled.num_rows
                _progress("scan", read, args.records, started)
            print(file=sys.stderr)

            described = conn.admin.describe_buckets(PATH)
            print(f"read back {read:,} of {args.records:,} records, in offset order, no gap, no duplicate")
            print("tier    records")
            print(f"local   {read:,}")
            for bucket, info in described.items():
                print(f"  bucket {bucket}: offsets [{info.local_log_start_offset}, {info.high_watermark}) {counts.get(bucket, 0):,} read")
            first = conn.admin.list_offsets(PATH, spec=OffsetSpec.timestamp(midpoint_ts))
            print(f"timestamp lookup at {midpoint_ts} (after the produce): offsets {first} (= the log ends)")
            return 0 if read == args.records else 1
