"""Benchmark 5: a tiering round (what ``lakelog tier --once`` runs: Spark tasks read the new log
records through the client and write Parquet, then one Iceberg commit) against a PyIceberg
``append`` of the same rows, already in memory, to a table of the same layout."""

from __future__ import annotations

import itertools

from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from lakelog.metadata import TablePath

from bench.cluster import DATABASE, BenchCluster
from bench.measure import Result, Trial, medians_in_turns, profile_if_missed, progress
from bench.sizes import Sizes


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    records = sizes.tier_records
    table = cluster.table("tiering", {"table.datalake.enabled": "true"})
    starts = itertools.count(0, records)
    options = TieringOptions(bootstrap=cluster.server.address, tables=(table.path,), client_config=cluster.client_config())
    progress("tiering: starting Spark (local[2]) for the tiering job")
    with TieringJob(options, spark=cluster.spark()) as job:

        def produce() -> None:
            cluster.produce(table, records, next(starts))

        def tier_round() -> None:
            tiered = job.run_round().records
            if tiered != records:
                raise RuntimeError(f"a tiering round tiered {tiered} records, not {records}")

        produce()
        tier_round()  # the rows the baseline appends; untimed, as the baseline's first append
        catalog = cluster.lake_catalog()
        rows = catalog.load_table(table.path).scan(limit=records).to_arrow()
        baseline = catalog.create_table(TablePath(DATABASE, "tiering_baseline"), table.info.schema)
        baseline.append(rows)
        progress(f"tiering: {sizes.runs} rounds of {records:,} new records each and PyIceberg appends of as many rows, in turns")
        tier_s, baseline_s = medians_in_turns(sizes.runs, Trial(tier_round, before=produce), Trial(lambda: baseline.append(rows)))
        result = Result(
            "5", "Tiering: one round into Iceberg", records / tier_s, "records/s", records / baseline_s,
            "PyIceberg append of the same rows in memory", baseline_s / tier_s, 0.5,
            detail=f"{records:,} records per round, Spark local[2], median of {sizes.runs} rounds",
            tier="lake write (tiering)",
            next_step="cut the fixed cost of a round (Spark job scheduling, Python worker start, one client per task) "
            "relative to its records: bigger rounds amortise it; read the range with fetch sizes tuned for bulk reads",
        )
        if not result.met:
            produce()
        profile_if_missed(result, tier_round)
        catalog.catalog.drop_table((DATABASE, "tiering_baseline"))
        catalog.close()
    cluster.drop(table)
    return [result]
