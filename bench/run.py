"""The one command: ``python -m bench.run [--quick] [--only NAME ...]`` runs the benchmarks on one
embedded cluster and writes ``bench/REPORT.md`` and ``bench/throughput.png``.

A benchmark that fails is named in the report with its error, and the others still run: a long
full-size run should not be lost to one broken step.
"""

from __future__ import annotations

import argparse
import logging
import time
import traceback
from dataclasses import replace
from types import ModuleType

from bench import lake_tier, local_tier, memory, produce, remote_tier, report, spark_paths, tiering, timestamp_lookup
from bench.cluster import BenchCluster
from bench.measure import Result, progress
from bench.sizes import FULL, QUICK

# Run order matters once: the lake benchmark is the first to use Spark, so it can time Spark's start.
BENCHMARKS: dict[str, ModuleType] = {
    "local": local_tier,
    "remote": remote_tier,
    "lake": lake_tier,
    "tiering": tiering,
    "produce": produce,
    "lookup": timestamp_lookup,
    "memory": memory,
    "spark": spark_paths,
}


def main() -> None:
    parser = argparse.ArgumentParser(description="Run lakelog's benchmarks and write bench/REPORT.md.")
    parser.add_argument("--quick", action="store_true", help="small sizes (a few minutes), for development")
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS), help="run only these benchmarks")
    parser.add_argument("--runs", type=int, help="timed runs per measurement (default: 5, quick: 3)")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    if args.runs:
        sizes = replace(sizes, runs=args.runs)
    logging.basicConfig(level=logging.ERROR)  # progress lines only; the server's own warnings are noise here

    began = time.monotonic()
    results: list[Result] = []
    failures: dict[str, str] = {}
    with BenchCluster(sizes.segment_bytes) as cluster:
        for name in args.only or BENCHMARKS:
            try:
                results += BENCHMARKS[name].run(cluster, sizes)
            except Exception as exc:  # noqa: BLE001 - report it and go on with the next benchmark
                traceback.print_exc()
                failures[name] = f"{type(exc).__name__}: {exc}"
    report.chart(results)
    report.write(results, failures, sizes, "quick" if args.quick else "full", time.monotonic() - began)
    progress(f"wrote {report.REPORT} and {report.CHART}")


if __name__ == "__main__":
    main()
