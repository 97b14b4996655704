"""Benchmark 11: lake compaction. The same records in the fewest and in the most lake data files of
the scaling curve (:mod:`bench.scaling`), each read from the lake alone with ``iceberg-arrow``; the
many-file table is then compacted once (``lakelog lake compact``: Spark tasks, one commit) and read
again. Reported: the read after compaction against the few-file read (target 0.9x), and the
compaction's records/s against a tiering round of the same records."""

from __future__ import annotations

import statistics

import lakelog
from lakelog.tiering.lake_maintenance import LakeMaintenance
from lakelog.tiering.tiering_job import TieringJob, TieringOptions

from bench.cluster import LAKE_PROPERTIES, BenchCluster
from bench.lake_tier import lakelog_scan
from bench.measure import Result, progress, timed
from bench.sizes import Sizes

AFTER_COMPACTION_TARGET = 0.9
READ = {"client.lake.source": "iceberg-arrow"}


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    records = sizes.scaling_lake_records
    few, many = min(sizes.scaling_lake_files), max(sizes.scaling_lake_files)
    reference = _in_lake_files(cluster, "compaction_few", records, few)
    few_rate = _lake_read(cluster, reference.path, records, f"{few:,} files")
    table = _in_lake_files(cluster, "compaction_many", records, many)
    before_rate = _lake_read(cluster, table.path, records, f"{many:,} files")
    progress(f"compaction: compacting the {many:,} files (Spark local[2])")
    with LakeMaintenance(cluster.server.address, cluster.client_config(), spark=cluster.spark()) as maintenance:
        compactor = maintenance.compactor()
        compactor.compact(reference.path)  # untimed: starts Spark's Python workers, as a tiering job's first round does
        report = compactor.compact(table.path)
    if report.records != records:
        raise RuntimeError(f"the compaction rewrote {report.records} records, not {records}")
    after_rate = _lake_read(cluster, table.path, records, f"{report.files_written:,} files after compaction")
    tier_s = _tiering_round(cluster, records)
    compaction_rate, tier_rate = records / report.seconds, records / tier_s
    for dropped in (reference, table):
        cluster.drop(dropped)
    return [
        Result(
            "11", f"Lake read after one compaction ({many:,} files -> {report.files_written})", after_rate, "records/s", few_rate,
            f"the same records in {few:,} files", after_rate / few_rate, AFTER_COMPACTION_TARGET,
            detail=f"{records:,} records, iceberg-arrow, lake only; before the compaction {before_rate:,.0f} records/s",
            tier="lake read (compacted)",
            next_step="compact to fewer, larger files (table.datalake.target-file-size) so the per-file cost vanishes",
        ),
        Result(
            "11a", "Compaction throughput", compaction_rate, "records/s", tier_rate, "a tiering round of the same records",
            compaction_rate / tier_rate, None,
            detail=f"{report.files_replaced:,} files into {report.files_written}, {report.seconds:.1f} s, Spark local[2]",
        ),
    ]


def _in_lake_files(cluster: BenchCluster, name: str, records: int, files: int) -> lakelog.Table:
    table = cluster.table(name, LAKE_PROPERTIES, buckets=1)
    cluster.produce(table, records)
    progress(f"compaction: {records:,} records into {files:,} lake data files")
    cluster.only_in_lake(table, files_per_bucket=files)
    return table


def _lake_read(cluster: BenchCluster, path: lakelog.TablePath, records: int, what: str) -> float:
    """Median of two reads, after one that warms the page cache and the imports."""
    lakelog_scan(cluster, path, records, READ)
    rate = records / statistics.median(timed(lambda: lakelog_scan(cluster, path, records, READ)) for _ in range(2))
    progress(f"compaction: lake read of {what}: {rate:,.0f} records/s")
    return rate


def _tiering_round(cluster: BenchCluster, records: int) -> float:
    """Seconds of one tiering round of ``records`` new records, the compaction's reference (on the
    same SparkSession, its workers started)."""
    table = cluster.table("compaction_tiering", {"table.datalake.enabled": "true"}, buckets=1)
    cluster.produce(table, records)
    options = TieringOptions(bootstrap=cluster.server.address, tables=(table.path,), client_config=cluster.client_config())
    with TieringJob(options, spark=cluster.spark()) as job:
        seconds = timed(job.run_round)
    cluster.drop(table)
    return seconds
