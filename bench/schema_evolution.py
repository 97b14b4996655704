"""Benchmark: reading records written under three schema versions against the same records under one.

Both tables end with the benchmark's schema and hold a third of their records only in the lake, a
third only in remote segments and a third on local disk. One was created with it; the other
started without column ``f4`` and with ``i0`` as int32, gained ``f4`` (so its remote third was
written under the second version) and then widened ``i0`` (its local third, the third version).
Reading the evolved one conforms every older batch or lake file to the current schema: a null
column where ``f4`` was missing, a cast where ``i0`` was narrower.
"""

from __future__ import annotations

import pyarrow as pa

import lakelog
from bench import data
from bench.cluster import LAKE_PROPERTIES, BenchCluster
from bench.lake_tier import lakelog_scan
from bench.measure import Result, Trial, medians_in_turns, progress
from bench.sizes import Sizes

ADDED = "f4"
WIDENED = "i0"
CHANGES = (
    [lakelog.TableChange.add_column(ADDED, pa.float64())],
    [lakelog.TableChange.widen_column(WIDENED, pa.int64())],
)


def version_one(schema: pa.Schema) -> pa.Schema:
    narrow = schema.set(schema.get_field_index(WIDENED), pa.field(WIDENED, pa.int32()))
    return narrow.remove(narrow.get_field_index(ADDED))


def in_schema(batches: list[pa.RecordBatch], schema: pa.Schema) -> list[pa.RecordBatch]:
    return [pa.RecordBatch.from_arrays([b.column(f.name).cast(f.type) for f in schema], schema=schema) for b in batches]


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    per_tier = sizes.evolution_records // 3
    total = 3 * per_tier
    one = cluster.table("one_schema", LAKE_PROPERTIES)
    evolved = cluster.table("three_schemas", LAKE_PROPERTIES, schema=version_one(data.SCHEMA))
    for tier in range(3):
        progress(f"schema evolution: {per_tier:,} records into the {('lake', 'remote', 'local')[tier]} tier of both tables")
        batches = data.chunks(per_tier, tier * per_tier)
        cluster.produce(one, per_tier, tier * per_tier, batches)
        cluster.produce(evolved, per_tier, tier * per_tier, in_schema(batches, evolved.info.schema))
        if tier == 0:
            cluster.only_in_lake(one)
            cluster.only_in_lake(evolved)
        elif tier == 1:
            cluster.to_remote(one)
            cluster.to_remote(evolved)
        if tier < len(CHANGES):
            cluster.conn.admin.alter_table(evolved.path, CHANGES[tier])
            evolved = cluster.conn.get_table(evolved.path)
    config = {"client.lake.source": "iceberg-arrow"}
    progress(f"schema evolution: reading {total:,} records of {one.path} and of {evolved.path}, in turns")
    one_s, evolved_s = medians_in_turns(
        sizes.runs, *(Trial(lambda path=table.path: lakelog_scan(cluster, path, total, config)) for table in (one, evolved))
    )
    return [
        Result(
            "E1", "Read: 3 schema versions across lake, remote and local", total / evolved_s, "records/s",
            total / one_s, "the same records under one schema, same tiers", one_s / evolved_s, 0.9,
            detail=f"{total:,} records, a third per tier; versions: without {ADDED} and {WIDENED} int32, {ADDED} added, {WIDENED} widened",
            tier="schema evolution",
            next_step=f"the older two thirds cast {WIDENED} to int64 (a copy of one column of ten) and the oldest adds a null "
            f"{ADDED}; both happen per decoded batch, after the decode",
        )
    ]
