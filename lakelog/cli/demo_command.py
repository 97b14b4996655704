"""`lakelog demo`: the README's main job, the whole story on the embedded default.

It starts a Spark Connect server and an embedded lakelog server that advertises it
(``lake.spark.master``), creates a lake-enabled table partitioned by day (yesterday's and today's
partitions), produces records into both, rolls and uploads segments to remote storage, tiers them
into Iceberg with the PySpark job through Spark Connect (one Iceberg partition per day and bucket),
expires what the lake now holds from remote and local storage, drops yesterday's partition from
the log (the lake keeps it), produces more into today's, then reads everything back from the
beginning through one scanner and prints which tier served how many records; last, a timestamp
lookup that only the lake can answer. The demo process itself runs no JVM: its Spark work (tiering,
and the lake reads of the default ``auto`` source) runs in the Connect server. It checks every step
and exits non-zero if anything is off.

The background tasks of a real deployment (uploads and expiry every ``remote.log.task-interval``,
``lakelog tier`` rounds) are run here one pass at a time, so the story is deterministic.

Progress goes to stderr (:mod:`lakelog.progress`); Spark logs errors only unless
``lakelog --log-level`` asks for more. Without ``--data-dir`` the data lives in a temporary
directory, named at the start and removed at the end.
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import tempfile
import time
from contextlib import contextmanager
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.tier_spans import tier_spans
from lakelog.progress import Progress
from lakelog.client.connection import connect
from lakelog.client.table import Table
from lakelog.logging_config import configure_logging
from lakelog.metadata import BucketInfo, OffsetSpec, TableDescriptor, TablePath

SCHEMA = pa.schema([("order_id", pa.int64()), ("customer", pa.string()), ("amount", pa.float64()), ("day", pa.string())])
PATH = TablePath("demo", "orders")
CHUNK = 2_000
# A read that brings nothing for this long has stalled (the first lake batch through Spark takes seconds).
IDLE_LIMIT_S = 120


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("demo", help="Run the whole story on an embedded server and print what happened.")
    parser.add_argument("--records", type=int, default=1_000_000, help="records to produce (default 1,000,000)")
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--data-dir", help="keep the data here (default: a temporary directory, removed at the end)")
    parser.add_argument("--lake-source", choices=["auto", "iceberg", "iceberg-arrow"], default="auto",
                        help="how the client reads the lake (default: auto, i.e. iceberg through the demo's Spark Connect server)")
    parser.set_defaults(handler=_run)


def _batch(start: int, count: int, day: str) -> pa.RecordBatch:
    ids = pa.array(range(start, start + count), pa.int64())
    customers = pc.binary_join_element_wise("customer-", pc.cast(pc.bit_wise_and(ids, 1023), pa.string()), "")
    amounts = pc.divide(pc.cast(pc.bit_wise_and(ids, 65535), pa.float64()), 100.0)
    return pa.record_batch([ids, customers, amounts, pa.array([day] * count, pa.string())], schema=SCHEMA)


def _days() -> tuple[str, str]:
    """Yesterday's and today's partition names (UTC, as auto-partitioning names days)."""
    today = datetime.datetime.now(datetime.timezone.utc).date()
    return ((today - datetime.timedelta(days=1)).strftime("%Y%m%d"), today.strftime("%Y%m%d"))


def _step(text: str) -> None:
    print(f"== {text}", flush=True)


def _produce(table: Table, start: int, count: int, why: str, days: tuple[str, ...]) -> None:
    """Produce ``count`` records from id ``start``, chunk by chunk over the partitions ``days``;
    ``why`` labels this run's progress bar."""
    with Progress(f"   produce {why}", count) as progress, table.new_append().create_writer() as writer:
        for index, offset in enumerate(range(start, start + count, CHUNK)):
            size = min(CHUNK, start + count - offset)
            writer.append_arrow(_batch(offset, size, days[index % len(days)]))
            progress.advance(size)


def _read_back(table: Table, expected: int) -> tuple[dict[str, int], int]:
    """Every record of every partition from the beginning, checked for order, gaps and duplicates
    per (partition, bucket)."""
    scanner = table.new_scan().create_log_scanner()
    scanner.subscribe_from_beginning()
    next_offset: dict[tuple[int, int], int] = {}
    seen = 0
    began = moved = time.monotonic()
    first_records_s = None
    with Progress("   read back", expected) as progress, scanner:
        while seen < expected and time.monotonic() - moved < IDLE_LIMIT_S:
            polled = scanner.poll_arrow(timeout_ms=1000)
            if polled.num_rows == 0:
                continue
            moved = time.monotonic()
            if first_records_s is None:
                first_records_s = moved - began
                progress.note(f"   first records after {first_records_s:.1f}s")
            stats = polled.group_by(["__partition_id", "__bucket"]).aggregate([("__offset", "min"), ("__offset", "max"), ("__offset", "count")])
            for row in stats.to_pylist():
                key = (row["__partition_id"], row["__bucket"])
                first, last, count = row["__offset_min"], row["__offset_max"], row["__offset_count"]
                if first != next_offset.get(key, 0) or last - first + 1 != count:
                    raise SystemExit(f"partition id {key[0]} bucket {key[1]}: expected offset {next_offset.get(key, 0)}, got {first}..{last} ({count} records)")
                next_offset[key] = last + 1
            seen += polled.num_rows
            progress.advance(polled.num_rows)
        tiers = scanner.records_by_tier()
    return tiers, seen


def _tier_of(offset: int, info: BucketInfo) -> str:
    """The tier a fetch at ``offset`` is answered from (local, else remote, else lake: docs/contract.md, "Tiers")."""
    if offset >= info.high_watermark:
        return "none (no record after the probe)"
    spans = tier_spans(info)
    return next((tier for tier in ("local", "remote") if (span := spans[tier]) and span.start <= offset < span.end), "lake")


def _server_config(data_dir: str, spark_master: str) -> dict[str, str | int]:
    return {
        "data.dir": data_dir,
        "server.port": 0,
        "log.segment.max-bytes": "128kb",
        "remote.log.task-interval": "1h",
        "lake.spark.master": spark_master,  # advertised: the tiering job and the client use it
    }


@contextmanager
def _connect_session_closed(address: str) -> Iterator[None]:
    """Stops this process's Spark Connect session on the way out, while the server still runs: a
    session left open retries its exit-time clean-up call against a stopped server for minutes."""
    try:
        yield
    finally:
        from lakelog.spark_runtime.spark_session import spark_session

        spark_session(address).stop()


def _run(args: argparse.Namespace) -> int:
    configure_logging("WARNING")
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="lakelog-demo-")
    try:
        return _story(args, data_dir)
    finally:
        if not args.data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
            print(f"removed the demo's temporary data directory {data_dir} (--data-dir DIR keeps the data)")


def _story(args: argparse.Namespace, data_dir: str) -> int:
    from lakelog.server.server_process import ServerProcess
    from lakelog.spark_runtime.connect_server import SparkConnectServer
    from lakelog.spark_runtime.spark_session import spark_log_conf
    from lakelog.tiering.tiering_job import TieringJob, TieringOptions

    first, second = args.records * 3 // 4, args.records - args.records * 3 // 4
    print("starting a Spark Connect server (lakelog spark-connect)", flush=True)
    # Errors only unless asked: its WARN lines are about the demo's own sessions.
    connect_server = SparkConnectServer(port=0, master="local[2]", conf=spark_log_conf(args.log_level or "ERROR"))
    with (
        connect_server as spark,
        _connect_session_closed(spark.address),
        ServerProcess(_server_config(data_dir, spark.address)) as server,
        connect(server.address, {"client.lake.source": args.lake_source}) as conn,
    ):
        assert server.tablet is not None
        remote = server.tablet.remote
        print(f"embedded lakelog server on {server.address} (lake.spark.master={spark.address})")
        print(f"data in {data_dir}" + ("" if args.data_dir else " (a temporary directory, removed when the demo ends)"))
        properties = {"table.datalake.enabled": "true", "table.log.ttl": "1ms", "table.log.tiered.local-segments": "1"}
        conn.admin.create_database(PATH.database, ignore_if_exists=True)
        descriptor = TableDescriptor(SCHEMA, args.buckets, properties, partition_keys=["day"])
        conn.admin.create_table(PATH, descriptor, ignore_if_exists=True)
        table = conn.get_table(PATH)
        yesterday, today = _days()
        for day in (yesterday, today):
            conn.admin.create_partition(PATH, {"day": day}, ignore_if_exists=True)

        _step(
            f"produce {first:,} records into partitions day={yesterday} and day={today}, {args.buckets} buckets each,"
            " in two halves: the time between them is the probe of the last step"
        )
        _produce(table, 0, first // 2, "first half", (yesterday, today))
        time.sleep(0.01)
        probe_ms = int(time.time() * 1000)
        _produce(table, first // 2, first - first // 2, "second half", (yesterday, today))

        _step("roll and upload segments to remote storage, keep 1 segment per bucket locally")
        report = remote.run_once()
        print(f"   uploaded {report.uploaded} segments, deleted {report.deleted_local} local ones")

        _step("tier the log into Iceberg with the PySpark job (one round, through Spark Connect; Iceberg partitions day, __bucket)")
        with TieringJob(TieringOptions(bootstrap=server.address)) as job:
            round_report = job.run_round()
        print(f"   tiered {round_report.records:,} records ({round_report.bytes:,} bytes)")

        _step("expire what the lake holds from remote and local storage (table.log.ttl)")
        report = remote.run_once()
        print(f"   expired {report.expired} remote segments")

        _step(f"drop partition day={yesterday} from the log: the lake holds all of it, and keeps it")
        conn.admin.drop_partition(PATH, {"day": yesterday})
        kept = [p for p in conn.admin.list_partition_infos(PATH) if p.partition_name == yesterday]
        print(f"   partition day={yesterday}: {'held by the lake only' if kept and kept[0].lake_only else 'gone'}")

        newest = min(second // 2, CHUNK * args.buckets)
        _step(f"produce {second:,} more records into day={today}: upload all but the newest {newest:,}, which stay local only")
        _produce(table, first, second - newest, "to be uploaded", (today,))
        # Rolled explicitly: how many batches one produce request carries depends on timing, and
        # so do the segments they fill; rolled, every record so far is uploaded.
        today_info = table.partition(today).info
        for bucket in range(args.buckets):
            bucket_log = server.tablet.logs.get(today_info.physical_id, bucket)
            if bucket_log is not None:
                bucket_log.roll()
        remote.run_once()
        _produce(table, first + second - newest, newest, "to stay local", (today,))
        for bucket, info in conn.admin.describe_buckets(PATH, partition_name=today).items():
            print(
                f"   day={today} bucket {bucket}: lake [{info.lake_log_start_offset}, {info.lake_log_end_offset}) "
                f"remote [{info.remote_log_start_offset}, {info.remote_log_end_offset}) "
                f"local [{info.local_log_start_offset}, {info.high_watermark})"
            )

        _step(f"read everything back from the beginning through one scanner (day={yesterday} from the lake alone)")
        tiers, read = _read_back(table, args.records)
        print(f"   read back {read:,} of {args.records:,} records, in offset order, no gap, no duplicate")
        print("   tier     records")
        for tier in ("lake", "remote", "local"):
            print(f"   {tier:8} {tiers[tier]:>9,}")

        _step(f"timestamp lookup in day={today} at {probe_ms} (half way through the first produce)")
        found = conn.admin.list_offsets(PATH, spec=OffsetSpec.timestamp(probe_ms), partition_name=today)
        described = conn.admin.describe_buckets(PATH, partition_name=today)
        answered_by = {bucket: _tier_of(offset, described[bucket]) for bucket, offset in found.items()}
        in_lake = "lake" in answered_by.values()
        print(f"   first offsets with timestamp >= {probe_ms}: {found}")
        print(f"   tier that holds each: {answered_by}")
        print(f"   answered by the lake: {'yes' if in_lake else 'no'}")
        ok = read == args.records and tiers["lake"] > 0 and in_lake
        return 0 if ok else 1
