"""Benchmark 8: the peak RSS of a client process that scans a table whose older half is only in
the lake and newer half only in remote segments (each ``memory_bytes_per_tier`` of log data)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench import data
from bench.cluster import LAKE_PROPERTIES, BenchCluster
from bench.measure import Result, progress
from bench.sizes import Sizes

LIMIT_MB = 600.0
REPO = Path(__file__).resolve().parents[1]


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    per_tier = data.records_for_bytes(sizes.memory_bytes_per_tier)
    table = cluster.table("memory", LAKE_PROPERTIES)
    progress(f"memory: {per_tier:,} records ({sizes.memory_bytes_per_tier / 1e9:.2f} GB) into the lake only")
    cluster.produce(table, per_tier)
    cluster.only_in_lake(table)
    progress(f"memory: {per_tier:,} records ({sizes.memory_bytes_per_tier / 1e9:.2f} GB) into remote segments only")
    cluster.produce(table, per_tier, per_tier)
    cluster.to_remote(table)

    config = json.dumps(cluster.client_config({"client.lake.source": "iceberg-arrow"}))

    def client(records: int) -> dict[str, float]:
        argv = [sys.executable, "-m", "bench.memory_client", cluster.server.address, str(table.path), str(records), config]
        return json.loads(subprocess.run(argv, cwd=REPO, check=True, capture_output=True, text=True).stdout)

    progress("memory: a client that only connects")
    idle_mb = client(0)["rss_peak_mb"]
    progress(f"memory: a client scanning {2 * per_tier:,} records from the lake and remote tiers")
    read = client(2 * per_tier)
    peak_mb = read["rss_peak_mb"]
    cluster.drop(table)
    return [
        Result(
            "8", "Memory: peak RSS of a scanning client", peak_mb, "MB", None, "", peak_mb, LIMIT_MB,
            lower_is_better=True,
            detail=f"{read['records']:,.0f} records, {2 * sizes.memory_bytes_per_tier / 1e9:.2f} GB of log data; "
            f"Arrow pool peak {read['arrow_pool_peak_mb']:.0f} MB; a client that only connects: {idle_mb:.0f} MB",
            next_step="bound what a poll holds: read-ahead of the lake reader (batches of client.lake.batch-rows per "
            "bucket) and of remote downloads (prefetch-num segments per bucket) are per bucket, not per scanner",
        )
    ]
