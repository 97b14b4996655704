"""Benchmark 9: how throughput scales with the work's shape, each dimension on its own, the rest
fixed: buckets (1, 4, 16, 64), tablet server processes (1, 2, 3: a coordinator and that many
tablet servers, each in its own process), lake data files (10, 1,000, 10,000 for the same
records, read with ``iceberg-arrow``) and record width (3 and 30 int64 columns). A cost that grows
linearly with the data keeps records/s flat across buckets, servers and files, and bytes/s flat
across widths; the report says where a curve bends (:func:`bends`) and the chart
(``bench/scaling.png``) shows every curve.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import lakelog

from bench import data
from bench.cluster import LAKE_PROPERTIES, BenchCluster
from bench.lake_tier import lakelog_scan
from bench.measure import progress, timed
from bench.scan import drain
from bench.sizes import Sizes

BUCKETS = (1, 4, 16, 64)
SERVERS = (1, 2, 3)
WIDTHS = (3, 30)
SERVER_BUCKETS = 12  # split evenly over 1, 2 or 3 tablet servers
RUNS = 2  # per point: a dozen points, and the ratios that matter are between points of one curve

# Why each curve has the shape it has, from how lakelog does the work (the report adds the numbers).
WHY = {
    "buckets": "a fetch asks for every bucket of a leader, each up to client.scanner.fetch.max-bytes-per-bucket "
    "within client.scanner.fetch.max-bytes per fetch, so more buckets cut the same records into more, smaller "
    "per-bucket answers: per bucket the server reads an index and a segment, the client decodes a table and "
    "builds its meta columns, and a bucket that reached its end waits on the server (max-wait) in a fetch "
    "of its own; the records are the same batches for every point (4 per bucket at 64 buckets)",
    "tablet servers": "each tablet server is a process of its own, but this machine has 2 cores shared by the "
    "client, the servers and other work: more servers add server-side parallelism only while the client "
    "(one polling thread decoding every answer) is not the bottleneck",
    "lake files": "the same records in more files: every file costs a manifest entry to plan, a footer to "
    "read and its own row-group reads, so when files hold only tens of rows the per-file cost, not the "
    "records, sets the time. Its floor here: pyarrow alone decodes one 200-row file of this table (13 zstd "
    "column chunks) in about 0.5 ms of CPU, 0.3 ms of it zstd's setup per chunk (0.2 ms the same file "
    "uncompressed), and polars, the quickest Parquet reader installable here, reads the 1,000 files in "
    "0.15-0.19 s on both cores, two to three times lakelog's whole scan of the 10-file table. pyarrow's own "
    "dataset scanner (C++, both cores, page checksums on) reads them in 0.70 s, one ParquetFile.read() per file "
    "on one thread in 0.72 s, lakelog in 0.96 s (1.2-1.3 s with a batch handed on per file, not consecutive small files' batches "
    "combined: lake/small_batches.py) and PyIceberg's to_arrow() in 1.9-2.0 s",
    "record width": "records/s falls with width as the bytes per record grow; per batch costs (CRC, IPC "
    "framing, meta columns) are paid per record count, so bytes/s grows with width",
    "group members": "each member is a process that decodes its own buckets' answers, so members add client-side "
    "parallelism; this machine has 2 cores shared by the members and the server, and each run includes the "
    "members joining and being assigned their buckets (a heartbeat or two)",
}


@dataclass(frozen=True)
class Point:
    dimension: str
    value: int
    records_per_s: float
    bytes_per_s: float
    records: int

    @property
    def seconds(self) -> float:
        return self.records / self.records_per_s


def _median_rate(run: Callable[[], object], records: int, runs: int = RUNS, warm_up: bool = True) -> float:
    """After one untimed run (connections, imports, the server's page cache) unless told not to."""
    if warm_up:
        run()
    return records / statistics.median(timed(run) for _ in range(runs))


def run(cluster: BenchCluster, sizes: Sizes) -> list[Point]:
    return [*_buckets(cluster, sizes), *_servers(cluster, sizes), *_lake_files(cluster, sizes), *_widths(cluster, sizes)]


def _local_point(cluster: BenchCluster, dimension: str, value: int, table: lakelog.Table, records: int, record_bytes: int) -> Point:
    rate = _median_rate(lambda: drain(table, records), records)
    progress(f"scaling: {dimension} = {value}: {rate:,.0f} records/s")
    return Point(dimension, value, rate, rate * record_bytes, records)


def _buckets(cluster: BenchCluster, sizes: Sizes) -> list[Point]:
    """The writer fills one bucket per batch, in turn: batches small enough for 4 per bucket at
    the most buckets, the same size for every point, so every bucket holds records."""
    records, points = sizes.scaling_records, []
    batches = data.chunks(records, size=max(records // (4 * max(BUCKETS)), 1))
    for buckets in BUCKETS:
        table = cluster.table(f"scaling_buckets_{buckets}", buckets=buckets)
        cluster.produce(table, records, batches=batches)
        points.append(_local_point(cluster, "buckets", buckets, table, records, data.RECORD_BYTES))
        cluster.drop(table)
    return points


def _servers(cluster: BenchCluster, sizes: Sizes) -> list[Point]:
    records, points = sizes.scaling_records, []
    for count in SERVERS:
        progress(f"scaling: a coordinator and {count} tablet server processes")
        servers = cluster.start_cluster(f"scaling-{count}", count)
        try:
            with cluster.connect(server=servers[0]) as conn:
                table = cluster.table("scaling_servers", conn=conn, buckets=SERVER_BUCKETS)
                cluster.produce(table, records)
                points.append(_local_point(cluster, "tablet servers", count, table, records, data.RECORD_BYTES))
        finally:
            for server in reversed(servers):
                server.stop()
    return points


def _lake_files(cluster: BenchCluster, sizes: Sizes) -> list[Point]:
    records, points = sizes.scaling_lake_records, []
    for files in sizes.scaling_lake_files:
        table = cluster.table(f"scaling_lake_{files}", LAKE_PROPERTIES, buckets=1)
        cluster.produce(table, records)
        progress(f"scaling: {records:,} records into {files:,} lake data files")
        cluster.only_in_lake(table, files_per_bucket=files)
        config = {"client.lake.source": "iceberg-arrow"}
        # One run: a lake scan opens a fresh connection and plans the snapshot each time anyway, and at
        # 10,000 files one run takes long enough on its own.
        rate = _median_rate(lambda: lakelog_scan(cluster, table.path, records, config), records, 1, warm_up=False)
        progress(f"scaling: lake files = {files}: {rate:,.0f} records/s")
        points.append(Point("lake files", files, rate, rate * data.RECORD_BYTES, records))
        cluster.drop(table)
    return points


def _widths(cluster: BenchCluster, sizes: Sizes) -> list[Point]:
    records, points = sizes.scaling_records, []
    for width in WIDTHS:
        schema = data.wide_schema(width)
        table = cluster.table(f"scaling_width_{width}", schema=schema)
        cluster.produce(table, records, batches=data.wide_chunks(schema, records))
        points.append(_local_point(cluster, "record width", width, table, records, 8 * width))
        cluster.drop(table)
    return points


def bends(points: Sequence[Point]) -> list[str]:
    """Per dimension: how far the curve is from flat (records/s, or bytes/s for width), the step
    where it drops most, and why it has that shape."""
    lines = []
    for dimension, group in itertools.groupby(points, key=lambda point: point.dimension):
        curve = list(group)
        rate = (lambda p: p.bytes_per_s) if dimension == "record width" else (lambda p: p.records_per_s)
        unit = "bytes/s" if dimension == "record width" else "records/s"
        first, last = curve[0], curve[-1]
        steps = [(rate(b) / rate(a), a, b) for a, b in zip(curve, curve[1:])]
        worst, a, b = min(steps, key=lambda step: step[0])
        shape = (
            f"{unit} from {first.value:,} to {last.value:,} {dimension}: {rate(last) / rate(first):.2f}x "
            f"({rate(first):,.0f} to {rate(last):,.0f}); the steepest step is {a.value:,} to {b.value:,} ({worst:.2f}x)"
        )
        verdict = "flat within 20%: no bend" if all(0.8 <= ratio <= 1.25 for ratio, *_ in steps) else (
            f"it bends at {a.value:,} to {b.value:,}" if worst < 0.8 else "it rises: fixed costs amortize"
        )
        per_unit = ""
        if dimension == "lake files" and last.value > first.value:
            extra_ms = (last.seconds - first.seconds) / (last.value - first.value) * 1000
            per_unit = f"; each extra file costs about {extra_ms:.1f} ms"
        lines.append(f"- **{dimension}**: {shape}{per_unit}; {verdict}. Why: {WHY[dimension]}.")
    return lines


def chart(points: Sequence[Point], path: Path) -> None:
    import matplotlib.pyplot as plt

    dimensions = list(dict.fromkeys(point.dimension for point in points))
    figure, axes = plt.subplots(1, len(dimensions), figsize=(4 * len(dimensions), 4), squeeze=False)
    for axis, dimension in zip(axes[0], dimensions):
        curve = [point for point in points if point.dimension == dimension]
        values = [point.value for point in curve]
        axis.plot(values, [point.records_per_s for point in curve], marker="o", label="records/s")
        if dimension == "record width":
            twin = axis.twinx()
            twin.plot(values, [point.bytes_per_s / 1e6 for point in curve], marker="s", color="tab:orange", label="MB/s")
            twin.set_ylabel("MB/s", color="tab:orange")
            twin.set_ylim(bottom=0)
        if dimension in ("buckets", "lake files"):
            axis.set_xscale("log")
        axis.set_xticks(values, [f"{value:,}" for value in values])
        axis.set_ylim(bottom=0)
        axis.set_xlabel(dimension)
        axis.set_ylabel("records/s")
        axis.set_title(f"throughput vs {dimension}")
    figure.suptitle("lakelog scaling: flat records/s means cost grows linearly with the data")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
