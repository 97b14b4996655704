"""``spark.read.format("lakelog")`` and ``spark.readStream`` on a partitioned table: every
partition's buckets across lake, remote and local tiers, a lake-only partition from the lake, and
filters on the partition key (or ``__partition_id``) that plan only the matching partitions.

Real parts: a server on loopback with remote storage on disk, a day-partitioned lake-enabled table
tiered into a real PyIceberg SQLite catalog by the tiering job, and the shared local SparkSession,
whose Python workers connect to the server themselves.
"""

from __future__ import annotations

import datetime
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
import lakelog.spark
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.harness.lake_tier import expire_remote
from tests.harness.partitioned_lake import BUCKETS, LAKE, RETENTION, ROWS, SCHEMA, scan_exactly, write_days

PATH = lakelog.TablePath("shop", "clicks")
META = ["__bucket", "__offset", "__timestamp", "__partition_id"]
ORDER = [("__partition_id", "ascending"), ("__bucket", "ascending"), ("__offset", "ascending")]


@dataclass
class PartitionedLog:
    server: ServerProcess
    days: dict[str, str]  # "old" (lake only), "kept", "today" -> partition name
    ids: dict[str, int]  # partition name -> id
    truth: pa.Table  # what a whole-table scanner reads, by partition id, bucket and offset

    def rows(self, *labels: str) -> pa.Table:
        wanted = pa.array([self.days[label] for label in labels])
        return self.truth.filter(pc.is_in(self.truth.column("dt"), wanted))


@pytest.fixture(scope="module")
def partitioned(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PartitionedLog]:
    """Three day partitions: ``old`` tiered then dropped from the log (lake only), ``kept`` tiered
    with its remote segments expired, ``today`` tiered, then written again: lake, remote and local."""
    data_dir = tmp_path_factory.mktemp("spark-partitions")
    server = ServerProcess(
        {
            "data.dir": str(data_dir),
            "server.port": 0,
            "log.segment.max-bytes": "64kb",
            "remote.log.task-interval": "1h",
            "remote.data.dir": (data_dir / "remote").as_uri(),
            "coordinator.auto-partition.check-interval": "1h",
        }
    ).start()
    assert server.coordinator is not None and server.tablet is not None
    today = datetime.datetime.now(datetime.timezone.utc).date()
    days = {label: (today - datetime.timedelta(days=n)).strftime("%Y%m%d") for label, n in (("old", 5), ("kept", 1), ("today", 0))}
    with lakelog.connect(server.address, {"client.lake.source": "iceberg-arrow"}) as conn:
        conn.admin.create_database("shop", ignore_if_exists=True)
        conn.admin.create_table(PATH, lakelog.TableDescriptor(SCHEMA, BUCKETS, {**LAKE, **RETENTION}, partition_keys=["dt"]))
        for label in ("old", "kept"):
            conn.admin.create_partition(PATH, {"dt": days[label]})
        table = conn.get_table(PATH)
        write_days(table, list(days.values()), 0)
        server.tablet.remote.run_once()  # uploads the rolled segments
        server.tablet.remote.run_once()  # then deletes the uploaded ones past the local one kept
        with TieringJob(TieringOptions(server.address), spark=spark) as job:
            assert job.run_round().records == 3 * ROWS
        expire_remote(server.tablet.remote)  # the lake holds them: remote segments go
        write_days(table, [days["today"]], ROWS)
        server.tablet.remote.run_once()
        server.tablet.remote.run_once()
        server.coordinator.coordinator.auto_partitioner.check_all()  # retention drops the old day's log
        listed = {p.partition_name: p for p in conn.admin.list_partition_infos(PATH)}
        assert listed[days["old"]].lake_only and not listed[days["kept"]].lake_only
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            truth = scan_exactly(scanner, 4 * ROWS).sort_by(ORDER)
            tiers = scanner.records_by_tier()
        assert all(tiers.get(tier, 0) > 0 for tier in ("lake", "remote", "local")), tiers
    yield PartitionedLog(server, days, {name: p.partition_id for name, p in listed.items()}, truth)
    server.stop(0)


def _read(spark: Any, log: PartitionedLog, **options: str) -> Any:
    lakelog.spark.register(spark)
    return spark.read.format("lakelog").option("bootstrap", log.server.address).option("table", str(PATH)).options(**options).load()


def _assert_same_rows(frame: Any, want: pa.Table) -> None:
    got = frame.toArrow().sort_by(ORDER)
    assert got.column_names == want.column_names
    assert got.num_rows == want.num_rows
    for name in want.column_names:
        assert got.column(name).equals(want.column(name)), name


def test_every_partition_is_read_across_the_tiers_with_its_id(partitioned: PartitionedLog, spark: Any) -> None:
    frame = _read(spark, partitioned)
    assert frame.columns == [*SCHEMA.names, *META]
    assert frame.rdd.getNumPartitions() == 3 * BUCKETS, "one Spark partition per bucket of each partition"
    _assert_same_rows(frame, partitioned.truth)
    ids = {row["dt"]: row["__partition_id"] for row in frame.select("dt", "__partition_id").distinct().collect()}
    assert ids == {day: partitioned.ids[day] for day in partitioned.days.values()}


@pytest.mark.parametrize(
    ("where", "labels"),
    [
        ("dt = '{kept}'", ["kept"]),
        ("dt = '{old}'", ["old"]),  # lake only: read from the lake
        ("dt IN ('{old}', '{today}')", ["old", "today"]),
        ("dt >= '{kept}'", ["kept", "today"]),
        ("dt <> '{today}'", ["old", "kept"]),
        ("dt LIKE '{today}%'", ["today"]),
        ("dt LIKE '%{kept}' AND dt IS NOT NULL", ["kept"]),
        ("dt <=> '{old}'", ["old"]),
        ("dt NOT IN ('{kept}', '{today}')", ["old"]),
        ("__partition_id = {kept_id}", ["kept"]),
        ("__partition_id IN ({old_id}, {kept_id}) AND dt > '{old}'", ["kept"]),
    ],
)
def test_filters_on_the_partition_key_plan_only_the_matching_partitions(
    partitioned: PartitionedLog, spark: Any, where: str, labels: list[str]
) -> None:
    names = {**partitioned.days, **{f"{label}_id": partitioned.ids[day] for label, day in partitioned.days.items()}}
    frame = _read(spark, partitioned).where(where.format(**names))
    assert frame.rdd.getNumPartitions() == len(labels) * BUCKETS, "only the matching partitions' buckets are planned"
    _assert_same_rows(frame, partitioned.rows(*labels))


def test_a_partition_filter_and_a_column_filter_together(partitioned: PartitionedLog, spark: Any) -> None:
    frame = _read(spark, partitioned, columns="dt, id").where(f"dt = '{partitioned.days['kept']}' AND id % 3 = 0")
    assert frame.rdd.getNumPartitions() == BUCKETS
    kept = partitioned.rows("kept")
    want = kept.filter(pa.array([i % 3 == 0 for i in kept.column("id").to_pylist()]))
    _assert_same_rows(frame, want.select(["dt", "id", *META]))


def test_a_timestamp_filter_is_resolved_in_every_partition_the_lake_only_one_included(partitioned: PartitionedLog, spark: Any) -> None:
    old = partitioned.rows("old")
    stamps = old.filter(pc.equal(old.column("__bucket"), 0)).column("__timestamp").to_pylist()
    since = stamps[len(stamps) // 2]
    frame = _read(spark, partitioned).where(f"__timestamp >= {since}")
    truth = partitioned.truth
    want = truth.filter(pc.greater_equal(truth.column("__timestamp"), since))
    assert 0 < want.num_rows < truth.num_rows
    _assert_same_rows(frame, want)


def test_a_stream_reads_every_partition_with_offsets_per_partition_and_bucket(
    partitioned: PartitionedLog, spark: Any, tmp_path: Path
) -> None:
    lakelog.spark.register(spark)
    checkpoint = tmp_path / "checkpoint"
    frame = (
        spark.readStream.format("lakelog")
        .option("bootstrap", partitioned.server.address)
        .option("table", str(PATH))
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        frame.writeStream.format("memory")
        .queryName("lakelog_partitions")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    deadline = time.monotonic() + 240
    while query.isActive:
        assert time.monotonic() < deadline, "the stream never caught up"
        time.sleep(0.2)
    assert query.exception() is None, query.exception()
    _assert_same_rows(spark.table("lakelog_partitions"), partitioned.truth)
    ends = json.loads((checkpoint / "offsets" / "0").read_text().splitlines()[-1])
    truth = partitioned.truth
    assert ends == {
        f"{pid}:{bucket}": truth.filter(pc.and_(pc.equal(truth.column("__partition_id"), pid), pc.equal(truth.column("__bucket"), bucket))).num_rows
        for pid in partitioned.ids.values()
        for bucket in range(BUCKETS)
    }


def test_a_consumer_group_reads_every_partition_the_lake_only_one_from_the_lake(partitioned: PartitionedLog) -> None:
    """The group hands out the buckets of every partition, the one only the lake holds included;
    its member starts those in the lake, the others where the log holds them."""
    with lakelog.connect(partitioned.server.address, {"client.lake.source": "iceberg-arrow"}) as conn:
        with conn.get_table(PATH).new_scan().create_log_scanner(group="whole-history") as scanner:
            got = scan_exactly(scanner, partitioned.truth.num_rows).sort_by(ORDER)
            tiers = scanner.records_by_tier()
            assert set(scanner.assignment()) == {
                (partition_id, bucket) for partition_id in partitioned.ids.values() for bucket in range(BUCKETS)
            }
    assert got.select(partitioned.truth.column_names).equals(partitioned.truth)
    assert all(tiers.get(tier, 0) > 0 for tier in ("lake", "remote", "local")), tiers
