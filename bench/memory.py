"""Benchmark 8: the peak RSS of a client process that scans a table whose oldest third is only in
the lake, the next only in remote segments and the newest only local (``memory_bytes`` of log
data in all)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from bench import data
from bench.cluster import LAKE_PROPERTIES, BenchCluster
from bench.measure import Result, progress
from bench.memory_client import SAMPLE_S
from bench.sizes import Sizes

LIMIT_MB = 400.0
# What README's Client memory section offers a process that must stay smaller, set before pyarrow loads.
PURGE_NOW = {"MIMALLOC_PURGE_DELAY": "0"}
PURGE_LABEL = " ".join(f"{key}={value}" for key, value in PURGE_NOW.items())
REPO = Path(__file__).resolve().parents[1]
TIERS = ("lake", "remote", "local")
_MIMALLOC_VERSION = re.compile(r"^v(\d+\.\d+\.\d+)", re.MULTILINE)
_PURGE_DELAY = re.compile(r"option 'purge_delay': (-?\d+)")


def mimalloc_purge_setting() -> str:
    """The mimalloc this pyarrow bundles and how long it keeps freed memory, as it prints them
    itself at start-up (MIMALLOC_VERBOSE=1): what the memory row's profile is explained by."""
    done = subprocess.run(
        [sys.executable, "-c", "import pyarrow; pyarrow.allocate_buffer(1)"],
        env={**os.environ, "MIMALLOC_VERBOSE": "1"}, stderr=subprocess.PIPE, text=True, check=True,
    )
    version, delay = _MIMALLOC_VERSION.search(done.stderr), _PURGE_DELAY.search(done.stderr)
    if version is None or delay is None:
        return "Arrow's pool is not mimalloc here, or it printed no options"
    return f"pyarrow's mimalloc {version[1]} gives freed memory back after a purge_delay of {delay[1]} ms (MIMALLOC_VERBOSE=1)"


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
    at_peak = read["at_peak"]
    return [
        Result(
            "8", "Memory: peak RSS of a scanning client", peak_mb, "MB", None, "", peak_mb, LIMIT_MB,
            lower_is_better=True,
            detail=f"{read['records']:,.0f} records, {sizes.memory_bytes / 1e9:.2f} GB of log data over three tiers; "
            f"Arrow pool peak {read['arrow_pool_peak_mb']:.0f} MB; a client that only connects: {idle_mb:.0f} MB; "
            f"the same scan with {PURGE_LABEL} in its environment: {purged['rss_peak_mb']:.0f} MB",
            next_step="the profile above says where: most of the RSS over Arrow's own use is memory Arrow's pool freed "
            "and mimalloc kept. pyarrow 26 bundles mimalloc 3.4.1 with a purge_delay of 1000 ms (MIMALLOC_VERBOSE=1), and "
            "memory one thread allocated and another freed (a scanner's reader threads allocate, the consumer frees) "
            "stays committed until a later allocation or a collect returns it: 800 MB allocated by four threads that had ended and "
            "freed by the main one were still resident 1.5 s later, 55 MB after one MemoryPool.release_unused() on the "
            "main thread. Measured on one prepared table, a client each, RSS per third sampled every 20 ms: defaults "
            "592-694 MB; MIMALLOC_PURGE_DELAY=0 384-403 MB, =1 456-480, =5 410-497, =10 411-547, =50 489-532, =100 "
            "451-463, =0 with MIMALLOC_ALLOW_LARGE_OS_PAGES=1 399-473; ARROW_DEFAULT_MEMORY_POOL=system 482-531, "
            "=jemalloc 436-531; client.scanner.max-buffered-bytes=64mb 444-550 (the scan about 8% slower), with "
            "MIMALLOC_PURGE_DELAY=0 347-406; Parquet decoded on lakelog's own threads (use_threads off) 660-735; "
            "release_unused() on the consumer's thread whenever RSS less Arrow's allocated bytes grew 64-128 MB past its "
            "level at the start 367-527 MB, but with 380-735 collects a scan and the scan 5-15% slower, and with that "
            "level moved up after each collect 7-24 collects and 534-604 MB. Earlier stops: release_unused() after "
            "every poll that waits and every lake row group 342-359 MB, but the lake read at 0.76x instead of 0.96x and "
            "the file:// remote read at 0.63x instead of 0.75x; MIMALLOC_PURGE_DELAY=0 alone the lake read at 0.90x "
            "and the file:// read at 0.40-0.60x; jemalloc with pyarrow.jemalloc_set_decay_ms(0) 352-382 MB, the lake "
            "read 38% and the file:// read 45% slower; pyarrow.set_memory_pool(jemalloc) at connect time 494-516 MB "
            "(Arrow's C++ readers keep the pool they started with). Every way under 400 MB gives freed pages back at "
            "once and faults them in again on the next read, which costs more on this machine than on most: its virtio balloon "
            "reports free pages to the host, and a page handed out again after that faults on the host (1 GB into new page "
            "cache: 2.1-2.3 s against 0.19-0.26 s for pages freed a moment before). Per third of the scan (the highest "
            "sample of each): lake 561-616 MB, remote 593-726, local 501-535, 132 MB of each the libraries' code; in the "
            "local third Arrow's pool held nothing while mimalloc's arenas still held 185-213 MB the remote third freed. "
            "Remote GETs of 8 MB instead of half the budget (64 MB) peaked at 473-479 MB (remote third 378-390) but the scan "
            "took 1.7x as long against moto, 16 MB 529 MB and 1.5x; each GET's buffer allocated on the consumer's thread "
            "(read with readinto) 721-728 MB; one pool of lake threads kept for the whole scan 648-652 MB. Next: buffers reused rather than freed for the reads' "
            "large allocations (remote GETs, Parquet column chunks), which needs a memory pool handed to pyarrow's "
            "Parquet reader (it takes none today), or mimalloc's options settable at run time (pyarrow exports none: "
            "only arrow_mi_collect), so a client could shorten the purge delay for itself",
            profile=[
                f"mimalloc's arenas (Arrow's default pool): {at_peak['arena_mb']:.0f} MB resident, of which Arrow's pool "
                f"had {at_peak['arrow_allocated_mb']:.0f} MB allocated: the rest is freed memory mimalloc had not yet "
                f"returned: {mimalloc_purge_setting()}",
                f"other anonymous memory (glibc's heaps: gRPC's receive buffers, answers, Python objects; thread stacks): "
                f"{at_peak['other_anonymous_mb']:.0f} MB",
                f"code and data of the interpreter and its libraries: {at_peak['files_mb']:.0f} MB",
            ],
            profile_heading=f"Where the memory is (/proc/self/smaps of the scanning client at its highest RSS sample, "
            f"{at_peak['rss_mb']:.0f} MB, sampled every {SAMPLE_S * 1000:.0f} ms):",
        )
    ]
