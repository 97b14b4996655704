"""Benchmark 8: the peak RSS of a client process that scans a table whose oldest third is only in
the lake, the next only in remote segments and the newest only local (``memory_bytes`` of log
data in all)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench import data
from bench.cluster import LAKE_PROPERTIES, BenchCluster
from bench.measure import Result, progress
from bench.sizes import Sizes

LIMIT_MB = 400.0
REPO = Path(__file__).resolve().parents[1]
TIERS = ("lake", "remote", "local")


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    per_tier = data.records_for_bytes(sizes.memory_bytes // len(TIERS))
    table = cluster.table("memory", LAKE_PROPERTIES)
    for index, tier in enumerate(TIERS):
        progress(f"memory: {per_tier:,} records ({sizes.memory_bytes / len(TIERS) / 1e9:.2f} GB) into the {tier} tier only")
        cluster.produce(table, per_tier, index * per_tier)
        if tier == "lake":
            cluster.only_in_lake(table)
        elif tier == "remote":
            cluster.to_remote(table)
    total = len(TIERS) * per_tier

    config = json.dumps(cluster.client_config({"client.lake.source": "iceberg-arrow"}))

    def client(records: int) -> dict[str, float]:
        argv = [sys.executable, "-m", "bench.memory_client", cluster.server.address, str(table.path), str(records), config]
        done = subprocess.run(argv, cwd=REPO, check=True, stdout=subprocess.PIPE, text=True)
        return json.loads(done.stdout)

    progress("memory: a client that only connects")
    idle_mb = client(0)["rss_peak_mb"]
    progress(f"memory: a client scanning {total:,} records from the lake, remote and local tiers")
    read = client(total)
    peak_mb = read["rss_peak_mb"]
    cluster.drop(table)
    return [
        Result(
            "8", "Memory: peak RSS of a scanning client", peak_mb, "MB", None, "", peak_mb, LIMIT_MB,
            lower_is_better=True,
            detail=f"{read['records']:,.0f} records, {sizes.memory_bytes / 1e9:.2f} GB of log data over three tiers; "
            f"Arrow pool peak {read['arrow_pool_peak_mb']:.0f} MB; a client that only connects: {idle_mb:.0f} MB",
            next_step="mimalloc, pyarrow's default pool, keeps what a thread freed in that thread's heap until it "
            "allocates again, and a scanner's threads take turns going idle: a poll about to wait and a lake row-group "
            "read that ends give back what their thread freed (lakelog/arrow_memory.py; 527-589 MB before, one "
            "prepared table, a client each). What is left is Arrow's pool itself (80-140 MB while the lake third is "
            "read: Parquet decoding ahead of the consumer) and the threads Arrow and gRPC keep: next, one row-group pool "
            "per scanner, counted in client.scanner.max-buffered-bytes",
        )
    ]
