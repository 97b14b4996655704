"""Benchmarks 1 and 2: reading the local tier with ``poll_arrow``, against a bare grpcio server
returning the same bytes in the same chunks; a projection of 1 column against all 10; and
``poll()``'s records against ``poll_arrow().to_pylist()``. Both servers run in processes of their
own (bench/server_host.py)."""

from __future__ import annotations

import subprocess
import sys

import lakelog

from bench import grpc_baseline, server_host
from bench.cluster import BenchCluster, log_bytes
from bench.measure import Result, Trial, median_seconds, medians_in_turns, profile_if_missed, progress
from bench.scan import drain
from bench.sizes import Sizes


def fetch_responses(cluster: BenchCluster, table: lakelog.Table) -> list[bytes]:
    """The record bytes of every FetchLog a full scan of ``table`` gets (:func:`bench.server_host.fetch_responses`)."""
    conf = cluster.conn.config
    per_fetch, per_bucket = conf.get("client.scanner.fetch.max-bytes"), conf.get("client.scanner.fetch.max-bytes-per-bucket")
    return cluster.server.call(server_host.fetch_responses, table.info.table_id, table.info.buckets, per_fetch, per_bucket)


CLI_CONTEXT_ROWS_S = 300_000
# Where a local read's time goes, should the target be missed again.
LOCAL_NEXT_STEP = (
    "the server keeps its answer-sized buffers on glibc's heap (server.malloc.mmap-threshold; page faults of fresh "
    "mappings were a third of its time), a scanner has two fetches in flight per server (the server reads one answer "
    "while the other travels), and CRC-32C runs at 23 GB/s (crc32c): a 5 M-record A/B went from 0.43-0.47x to "
    "1.05-1.16x. What is left per answer: the server's join of its bucket reads and gRPC's copy of the message, and on "
    "the client the receive copy and the meta columns; next, pread each bucket straight into the answer's buffer"
)


def cli_scan(cluster: BenchCluster, table: lakelog.Table, rows: int) -> None:
    """``lakelog scan`` as a user runs it, its JSON lines written to a file (not a terminal)."""
    out = cluster.directory / "scan.jsonl"
    argv = [
        sys.executable, "-m", "lakelog", "scan", str(table.path), "--bootstrap", cluster.server.address,
        "--output", "jsonl", "--max-records", str(rows),
    ]
    with open(out, "wb") as sink:
        subprocess.run(argv, stdout=sink, check=True)
    out.unlink()


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    records = sizes.local_records
    progress(f"local tier: producing {records:,} records into a 4-bucket table (10 numeric columns)")
    table = cluster.table("local_tier")
    cluster.produce(table, records)
    size = log_bytes(table, cluster)
    responses = fetch_responses(cluster, table)

    progress(
        f"local tier: bare grpcio baseline ({len(responses)} responses of {size / len(responses) / 1e6:.1f} MB), "
        "lakelog poll_arrow of all 10 columns and of 1, in turns"
    )
    with server_host.HostedBaseline(responses) as server:
        baseline_s, full_s, projected_s = medians_in_turns(
            sizes.runs,
            Trial(lambda: grpc_baseline.fetch_all(server.address, len(responses))),
            Trial(lambda: drain(table, records)),
            Trial(lambda: drain(table, records, ["i0"])),
        )
    rows = min(records, sizes.record_rows)
    progress(f"local tier: poll() records against poll_arrow().to_pylist(), {rows:,} records, in turns")
    pylist_s, records_s = medians_in_turns(
        sizes.runs, Trial(lambda: drain(table, rows, form="pylist")), Trial(lambda: drain(table, rows, form="records"))
    )
    progress(f"local tier: lakelog scan --output jsonl, {rows:,} records")
    cli_s = median_seconds(lambda: cli_scan(cluster, table, rows), sizes.runs)

    local = Result(
        "1", "Local tier: poll_arrow", records / full_s, "records/s", records / baseline_s,
        "bare grpcio server, same bytes and chunks, Arrow IPC decode", baseline_s / full_s, 0.7,
        detail=f"{size / full_s / 1e6:,.0f} MB/s vs {size / baseline_s / 1e6:,.0f} MB/s; {records:,} records, {size / 1e6:,.0f} MB",
        tier="local",
        next_step=LOCAL_NEXT_STEP,
    )
    projection = Result(
        "2", "Projection: 1 of 10 columns", records / projected_s, "records/s", records / full_s,
        "all 10 columns (lakelog)", full_s / projected_s, 6.0, detail="local tier, server-side projection",
        next_step="a projected fetch now reads only the kept columns' bytes (each batch's header and Arrow metadata, "
        "then one pread per kept column; lakelog/record/projection.py) and max-bytes counts projected bytes, so a "
        "projected scan takes a tenth of the fetches: 2.2x to 4.6-5.8x in runs of bench --only local. What is left, "
        "measured on a 5 M-record scan of 0.08 s: the client waits about 28 ms for the first 16.7 MB answer (all four "
        "buckets read, then sent) and decodes it in 38 ms, the same answer that takes 10-15 ms to decode alone: the "
        "server's reads, gRPC's receive and the decode share two cores, so work moved to another client thread "
        "(meta columns built on the fetch thread) saves nothing. What costs CPU per answer: the meta columns (20 bytes "
        "a row against the 8 of the one column kept, a third of the decode), the CRC, 20 us of Python per batch. "
        "Measured since, five projected scans under cProfile: building the meta columns 20 ms a scan (a quarter of "
        "it); numpy's full/arange/repeat build the same columns in 441 us per 400 k rows against 644 us, about 3% of "
        "the scan, so not taken. The server copies each answer twice: joining its parts (encode_fetch_response) "
        "and grpcio copying the bytes into its own buffer. Full runs of make bench gave 4.57-5.89x. A server's first "
        "fetch is now split in two, as a backlog's fetches are, so the server reads both halves at once; polls "
        "wait for both first answers, so a small table's first poll still holds every bucket: in four pairs of "
        "bench --only local in turns 6.28-6.71x against 5.42-5.86x (the projected scan 82-97 M records/s against "
        "70-81 M, the full scan unchanged). Next: the records read into their final place in the answer, which "
        "drops the join (its parts' sizes are known from the index before the reads)",
    )
    as_records = Result(
        "2b", "poll() records", rows / records_s, "records/s", rows / pylist_s,
        "poll_arrow().to_pylist() (lakelog)", pylist_s / records_s, 0.8,
        detail=f"{rows:,} records of 10 columns, each ScanRecord taken", tier="local (ScanRecord)",
        next_step="ScanRecords are built in C (tuple.__new__ over zip of to_pylist() columns); what is left per "
        "record is the row dict Arrow builds: build rows lazily, on first access of .row",
    )
    cli = Result(
        "2c", "CLI scan to jsonl", rows / cli_s, "records/s", None, "", rows / cli_s, None,
        detail=f"`lakelog scan --output jsonl --max-records {rows:,}` to a file, {rows:,} records of 10 columns, "
        f"process start included; the context figure is 300,000 rows/s "
        f"({'reached' if rows / cli_s >= CLI_CONTEXT_ROWS_S else 'not reached'})",
    )
    profile_if_missed(local, lambda: drain(table, records))
    profile_if_missed(projection, lambda: drain(table, records, ["i0"]))
    profile_if_missed(as_records, lambda: drain(table, rows, form="records"))
    cluster.drop(table)
    return [local, projection, as_records, cli]
