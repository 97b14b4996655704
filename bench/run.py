"""The one command: ``python -m bench.run [--quick] [--only NAME ...]`` runs the benchmarks on one
embedded cluster and writes ``bench/REPORT.md``, ``bench/throughput.png`` and ``bench/scaling.png``.

A benchmark that fails is named in the report with its error, and the others still run: a long
full-size run should not be lost to one broken step.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Iterator

from bench import (
    asyncio_client,
    compaction,
    groups,
    hostile_clients,
    lake_tier,
    local_tier,
    memory,
    partitions,
    produce,
    remote_tier,
    replication,
    report,
    scaling,
    schema_evolution,
    spark_paths,
    tiering,
    timestamp_lookup,
)
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
    "asyncio": asyncio_client,
    "lookup": timestamp_lookup,
    "scaling": scaling,
    "compaction": compaction,
    "memory": memory,
    "partitions": partitions,
    "hostile": hostile_clients,
    "spark": spark_paths,
    "replication": replication,
    "evolution": schema_evolution,
    "groups": groups,
}


ALIGNMENT_WARNING = "poorly aligned"


@contextmanager
def captured_stderr() -> Iterator[Path]:
    """File descriptor 2 of this process and of every child it starts (servers, Spark, the CLI) goes
    to a file: Arrow's C++ warnings ("An input buffer was poorly aligned ...") are written there,
    not through Python's warnings. Progress lines and tracebacks still reach the terminal."""
    capture = tempfile.NamedTemporaryFile(prefix="lakelog-bench-stderr-", suffix=".log", delete=False)
    saved = os.dup(2)
    terminal = sys.stderr
    sys.stderr = os.fdopen(os.dup(saved), "w", buffering=1)
    os.dup2(capture.fileno(), 2)
    try:
        yield Path(capture.name)
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        sys.stderr.close()
        sys.stderr = terminal
        capture.close()


def alignment_result(captured: Path) -> Result:
    """Row 10: lines of Arrow's misalignment warning written by anything the run started."""
    text = captured.read_text(errors="replace")
    count = sum(ALIGNMENT_WARNING in line for line in text.splitlines())
    return Result(
        "10", "'poorly aligned' warnings, every benchmark", count, "lines", None, "", count, 1,
        lower_is_better=True,
        detail=f"counted on the standard error of the benchmark process and every process it started ({len(text):,} bytes)",
        next_step="find the decode that hands Arrow a buffer off its 8-byte boundary (the first warning's context "
        "in the captured standard error) and align it as the fetch answers are",
    )


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
    points: list[scaling.Point] = []
    failures: dict[str, str] = {}
    load = report.load_average()
    mode = "quick" if args.quick else "full"
    names = args.only or list(BENCHMARKS)

    def write(done: int) -> None:
        """The report of what ran so far: a long run stopped midway still leaves its numbers."""
        report.chart(results)
        if points:
            scaling.chart(points, report.SCALING_CHART)
        left = [] if done == len(names) else names[done:]
        report.write(results, points, failures, sizes, mode, time.monotonic() - began, load, left)

    with captured_stderr() as captured, BenchCluster(sizes.segment_bytes) as cluster:
        for done, name in enumerate(names, 1):
            try:
                if name == "scaling":
                    points += scaling.run(cluster, sizes)
                else:
                    # A benchmark's curve points go to the scaling section, its rows to the table.
                    for item in BENCHMARKS[name].run(cluster, sizes):
                        (points if isinstance(item, scaling.Point) else results).append(item)
            except Exception as exc:  # noqa: BLE001 - report it and go on with the next benchmark
                traceback.print_exc()
                failures[name] = f"{type(exc).__name__}: {exc}"
            if done < len(names):
                write(done)
    results.append(alignment_result(captured))
    captured.unlink()
    write(len(names))
    progress(f"wrote {report.REPORT}, {report.CHART} and {report.SCALING_CHART}")


if __name__ == "__main__":
    main()
