"""Benchmark 4: a scan served from the lake, with the ``iceberg-arrow`` LogSource against PyIceberg's
own ``scan(...).to_arrow()`` of the same rows and columns, and with the ``iceberg`` (Spark) LogSource,
whose first scan also pays for starting Spark."""

from __future__ import annotations

from typing import Any

import lakelog
from lakelog.record.meta_columns import META_COLUMNS

from bench import data
from bench.cluster import LAKE_PROPERTIES, BenchCluster
from bench.measure import Result, Trial, median_seconds, medians_in_turns, profile_if_missed, progress, timed
from bench.scan import drain
from bench.sizes import Sizes


SPARK_RUNS = 3  # a full-size Spark scan takes minutes: at most three warm runs for its median


def lakelog_scan(cluster: BenchCluster, path: lakelog.TablePath, records: int, config: dict[str, Any]) -> None:
    """A fresh connection each time: it plans the lake snapshot as PyIceberg's scan does."""
    with cluster.connect(config) as conn:
        drain(conn.get_table(path), records)


def pyiceberg_scan(cluster: BenchCluster, path: lakelog.TablePath) -> int:
    catalog = cluster.lake_catalog()
    try:
        return catalog.load_table(path).scan(selected_fields=(*data.SCHEMA.names, *META_COLUMNS)).to_arrow().num_rows
    finally:
        catalog.close()


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    records = sizes.lake_records
    progress(f"lake tier: producing {records:,} records, tiering them and expiring them from remote and local")
    table = cluster.table("lake_tier", LAKE_PROPERTIES)
    cluster.produce(table, records)
    cluster.only_in_lake(table)
    path = table.path

    arrow = {"client.lake.source": "iceberg-arrow"}
    progress("lake tier: PyIceberg scan().to_arrow() baseline and lakelog poll_arrow with iceberg-arrow, in turns")
    baseline_s, arrow_s = medians_in_turns(
        sizes.runs, Trial(lambda: pyiceberg_scan(cluster, path)), Trial(lambda: lakelog_scan(cluster, path, records, arrow))
    )
    arrow_result = Result(
        "4a", "Lake tier: poll_arrow, iceberg-arrow", records / arrow_s, "records/s", records / baseline_s,
        "PyIceberg scan().to_arrow(), same rows and columns", baseline_s / arrow_s, 1.1,
        detail=f"{records:,} records", tier="lake (iceberg-arrow)",
        next_step="both reads are CPU-bound on this machine's 2 shared cores, about 1.0 s of CPU per 5 M records "
        "each, over half of it zstd decompression in Arrow's threads, which every reader of these files pays. "
        "lakelog hands the scanner each row group's batches as they decode (PyIceberg builds the whole table "
        "first) and verifies every page's checksum (2-3% of its CPU), so that a damaged file fails naming itself. "
        "With CPU at parity (0.9-1.1 s each) the ratio follows the load of the other processes on the cores: "
        "0.89-1.97 in runs of five scans each in this benchmark's order, below 1.1 when the cores are idle enough "
        "for PyIceberg's read to use both (0.47 s). What is left on lakelog's side is Python per batch (casts, "
        "__timestamp's division, the scanner's offset checks, 28 ms a scan) and the checksums",
    )
    profile_if_missed(arrow_result, lambda: lakelog_scan(cluster, path, records, arrow))
    spark_result = _spark_scan(cluster, path, records, baseline_s, sizes.runs)
    cluster.drop(table)
    return [arrow_result, spark_result]


def _spark_scan(cluster: BenchCluster, path: lakelog.TablePath, records: int, baseline_s: float, runs: int) -> Result:
    """The Spark LogSource's line; a failed read is reported on it, the iceberg-arrow line stands."""
    spark = {"client.lake.source": "iceberg", "lake.spark.master": "local[2]"}
    progress("lake tier: lakelog poll_arrow with iceberg (Spark), first scan starts Spark")
    name, baseline_name = "Lake tier: poll_arrow, iceberg (Spark)", "PyIceberg scan().to_arrow(), same rows and columns"
    try:
        spark_cold_s = timed(lambda: lakelog_scan(cluster, path, records, spark))
        spark_s = median_seconds(lambda: lakelog_scan(cluster, path, records, spark), min(runs, SPARK_RUNS))
    except (lakelog.LakelogError, RuntimeError) as error:  # RuntimeError: the scan stalled (bench.scan.drain)
        cause = "Java heap space" if "OutOfMemoryError" in str(error) else str(error).splitlines()[0][:200]
        return Result(
            "4b", name, 0.0, "records/s", records / baseline_s, baseline_name, 0.0, None,
            detail=f"failed: {type(error).__name__}: {cause}", tier="lake (Spark)",
        )
    return Result(
        "4b", name, records / spark_s, "records/s", records / baseline_s, baseline_name, baseline_s / spark_s, None,
        detail=f"warm median; first scan {spark_cold_s:.1f} s, of which about {max(spark_cold_s - spark_s, 0):.1f} s starting Spark; no target",
        tier="lake (Spark)",
    )
