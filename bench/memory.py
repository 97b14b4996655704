"""Benchmark 8: the peak RSS of a client process that scans a table whose oldest third is only in
the lake, the next only in remote segments and the newest only local (``memory_bytes`` of log
data in all)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench import data
from bench.cluster import LAKE_PROPERTIES, BenchCluster
from bench.measure import Result, progress
from bench.sizes import Sizes

LIMIT_MB = 400.0
# What README's Client memory section offers a process that must stay smaller, set before pyarrow loads.
PURGE_NOW = {"MIMALLOC_PURGE_DELAY": "0"}
PURGE_LABEL = " ".join(f"{key}={value}" for key, value in PURGE_NOW.items())
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

    def client(records: int, env: dict[str, str] | None = None) -> dict[str, float]:
        argv = [sys.executable, "-m", "bench.memory_client", cluster.server.address, str(table.path), str(records), config]
        done = subprocess.run(argv, cwd=REPO, check=True, stdout=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
        return json.loads(done.stdout)

    progress("memory: a client that only connects")
    idle_mb = client(0)["rss_peak_mb"]
    progress(f"memory: a client scanning {total:,} records from the lake, remote and local tiers")
    read = client(total)
    peak_mb = read["rss_peak_mb"]
    progress(f"memory: the same scan with {PURGE_LABEL} (README, Client memory)")
    purged = client(total, PURGE_NOW)
    cluster.drop(table)
    return [
        Result(
            "8", "Memory: peak RSS of a scanning client", peak_mb, "MB", None, "", peak_mb, LIMIT_MB,
            lower_is_better=True,
            detail=f"{read['records']:,.0f} records, {sizes.memory_bytes / 1e9:.2f} GB of log data over three tiers; "
            f"Arrow pool peak {read['arrow_pool_peak_mb']:.0f} MB; a client that only connects: {idle_mb:.0f} MB; "
            f"the same scan with {PURGE_LABEL} in its environment: {purged['rss_peak_mb']:.0f} MB",
            next_step="RSS sampled every 0.1 s through one scan: up to 402 MB in the lake third, 514-546 MB in the remote "
            "third, 546-574 MB in the local one, while Arrow's pool held at most 162 MB, and 1 MB at the peak, when "
            "/proc/self/smaps showed 254-369 MB resident in mimalloc's arena (four scans) and 70-130 MB in glibc's heaps "
            "(gRPC's receive buffers, answers as Python bytes). mimalloc, pyarrow's default pool, keeps what a thread "
            "freed in that thread's heap until it allocates again, and a scanner's "
            "threads (fetches, downloads, lake row groups, Arrow's Parquet decoding) take turns going idle. Measured "
            "on one prepared table, a client each: defaults 547-626 MB; MIMALLOC_PURGE_DELAY=0 368 MB and "
            "ARROW_DEFAULT_MEMORY_POOL=jemalloc 397-549 MB, that scan as fast, both read by Arrow when it loads, so a "
            "process sets them before it imports pyarrow (README, Client memory); pyarrow.set_memory_pool(jemalloc) at connect "
            "time only reached 494-516 MB (Arrow's C++ readers keep the pool they started with), so lakelog has no "
            "config key for it; client.lake.read-threads=1 561 MB, client.scanner.max-buffered-bytes=32mb 542 MB. "
            "Tried since: collecting a thread's heap (MemoryPool.release_unused) after every poll that waits and every "
            "lake row group read: 342-359 MB, but the lake read fell from 0.96x to 0.76x and the file:// remote read from "
            "0.75x to 0.63x (the next read faults the pages in again); at most once a second per thread: 420-466 MB. "
            "MIMALLOC_PURGE_DELAY=0 costs the same kind of speed (lake 0.90x, file:// 0.40-0.60x). One row-group pool of "
            "two threads for the whole process instead of one per bucket: 507 MB against 517-525 MB, so the lake threads "
            "are not where it is kept; glibc's mmap threshold fixed at 4 MB (MALLOC_MMAP_THRESHOLD_, so answers are "
            "unmapped when freed): 480-592 MB against 541-604 MB, no change. Measured since, one prepared table: the peak "
            "comes in the local third, when Arrow's pool holds 0-2 MB and mimalloc's arena 173-271 MB freed in the lake "
            "and remote thirds; the lake reader thread collecting its heap as it ends: 457 and 573 MB; remote GETs into "
            "buffers outside Arrow's pool (numpy, unmapped when freed): the local third fell to about 345 MB in two scans "
            "of three, but the peak moved to the remote third (558-621 MB, two 64 MB GETs in flight); "
            "jemalloc with pyarrow.jemalloc_set_decay_ms(0) "
            "352-382 MB, but the lake read 38% and the file:// remote read 45% slower (bench --only local remote lake, "
            "twice each). Next: mimalloc's purge options set by the client for its own threads, which pyarrow does not "
            "expose (libarrow exports only arrow_mi_collect)",
        )
    ]
