"""Benchmark 7: ``list_offsets(spec=OffsetSpec.timestamp(ms))`` latency in each tier, on one lake
table whose oldest records are only in the lake (in many data files), the next only in remote
segments, the newest only local. The lake is read with ``iceberg-arrow``."""

from __future__ import annotations

import random
import time
from functools import partial

import lakelog
from lakelog.metadata import OffsetSpec

from bench.cluster import LAKE_PROPERTIES, BenchCluster
from bench.measure import Result, latencies_ms, percentile, profile_if_missed, progress
from bench.sizes import Sizes

TARGETS_MS = {"local": 5.0, "remote": 5.0, "lake": 50.0}
NEXT_STEPS = {
    "local": "answer from the time index without a coordinator round trip per lookup (cache table metadata in the admin)",
    "remote": "keep each remote segment's time index in the tablet server's memory instead of reading it from S3 per lookup",
    "lake": "keep the planned files' timestamp bounds per snapshot and read only the one row group whose "
    "statistics bracket the timestamp",
}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def lookup(conn: lakelog.Connection, path: lakelog.TablePath, bucket: int, ms: int) -> None:
    conn.admin.list_offsets(path, buckets=[bucket], spec=OffsetSpec.timestamp(ms))


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    records, files = sizes.lookup_records_per_tier, sizes.lookup_lake_files
    table = cluster.table("lookup", LAKE_PROPERTIES)
    windows: dict[str, tuple[int, int]] = {}

    def phase(tier: str, start: int) -> None:
        began = now_ms()
        cluster.produce(table, records, start)
        windows[tier] = (began, now_ms())

    progress(f"timestamp lookup: {records:,} records into the lake as {files} data files")
    phase("lake", 0)
    cluster.only_in_lake(table, files_per_bucket=max(files // table.info.buckets, 1))
    progress(f"timestamp lookup: {records:,} records into remote segments, {records:,} local")
    phase("remote", records)
    cluster.to_remote(table)
    phase("local", 2 * records)

    results = []
    rng = random.Random(7)
    with cluster.connect({"client.lake.source": "iceberg-arrow"}) as conn:
        path, buckets = table.path, table.info.buckets
        calls = {
            tier: [partial(lookup, conn, path, rng.randrange(buckets), rng.randint(*window)) for _ in range(sizes.lookups)]
            for tier, window in windows.items()
        }
        first_ms = latencies_ms(calls["lake"][:1])[0]  # plans the lake snapshot: paid once per snapshot
        for key, tier in (("7a", "local"), ("7b", "remote"), ("7c", "lake")):
            progress(f"timestamp lookup: {sizes.lookups} lookups in the {tier} tier")
            # The lake's first lookup (it plans the snapshot) counts among the lake's latencies.
            latencies = [first_ms, *latencies_ms(calls[tier][1:])] if tier == "lake" else latencies_ms(calls[tier])
            p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
            detail = f"p99 {p99:.1f} ms over {len(latencies)} lookups"
            if tier == "lake":
                detail += f"; {files} data files; the first lookup, which plans the snapshot, took {first_ms:.0f} ms"
            result = Result(
                key, f"Timestamp lookup p50: {tier}", p50, "ms", None, "", p50, TARGETS_MS[tier],
                lower_is_better=True, detail=detail, next_step=NEXT_STEPS[tier],
            )
            results.append(profile_if_missed(result, lambda: [call() for call in calls[tier][:50]]))
    cluster.drop(table)
    return results
