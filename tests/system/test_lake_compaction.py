"""Compaction of the lake (docs/contract.md, "Lake maintenance"): small files bin-packed as Spark tasks and committed as
one snapshot that holds the same records, offsets, timestamps and lake ranges; racing a tiering
round both ways; automatic in ``lakelog tier``; a lake-only partition; plain PyIceberg reading the
same rows before and after.

Real parts throughout: a server on loopback, the tiering job and the compaction on the shared local
SparkSession, a SQLite catalog and a local warehouse, checked with PyIceberg and the lakelog client.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.errors import InvalidTableError
from lakelog.lake.iceberg_scan_planner import LakeDataFile
from lakelog.lake.snapshot_summary import BARRIER, BUCKET_OFFSETS, COMPACTION, latest_lake_snapshot
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.compaction_planner import plan_bins
from lakelog.tiering.lake_maintenance import LakeMaintenance
from lakelog.tiering.tiering_job import AUTO_COMPACTION_MIN_FILES, TieringJob, TieringOptions
from lakelog.server.status.cluster_status import ClusterStatus
from tests.harness.lake_compaction import BUCKETS, COMPACTED_TABLE, PATH, data_files, lake_rows, tier_rounds
from tests.harness.lake_tier import LAKE_TABLE, assert_lake_holds_log, lake_table
from tests.harness.metrics_scrape import Scrape
from tests.harness.tables import create_table, produce_orders, scan_all


def maintenance(server: ServerProcess, spark: Any) -> LakeMaintenance:
    return LakeMaintenance(server.address, spark=spark)


# ---------------------------------------------------------------- planning


def _file(first: int, last: int, size: int) -> LakeDataFile:
    return LakeDataFile(f"/wh/data/__bucket=0/{first}.parquet", first, last, None, size, last - first + 1)


def test_bins_are_runs_of_neighbouring_small_files_up_to_the_target() -> None:
    files = [_file(0, 9, 10), _file(10, 19, 10), _file(20, 29, 100), _file(30, 39, 10), _file(40, 49, 20), _file(50, 59, 15)]
    bins = plan_bins({("", 0): files, ("", 1): files[:1]}, target_size=40)
    # 20..29 is not small (100 >= 0.75 * 40) and splits the runs; 30..59 would pass 40: two bins there,
    # the second of one file, which is left alone. Bucket 1's single file has no neighbour.
    assert [[f.first_offset for f in b.files] for b in bins] == [[0, 10], [30, 40]]
    assert [(b.first_offset, b.end_offset, b.record_count, b.size_bytes) for b in bins] == [(0, 20, 20, 20), (30, 50, 20, 30)]
    assert all(b.file_path.startswith("/wh/data/__bucket=0/0000000000000000") for b in bins)
    # A gap (never in a real bucket) is never bridged.
    assert plan_bins({("", 0): [_file(0, 9, 1), _file(11, 19, 1)]}, 40) == []


def test_a_target_size_below_the_floor_is_refused(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        with pytest.raises(InvalidTableError, match="table.datalake.target-file-size='1kb': must be between 64kb and 16gb"):
            create_table(conn, properties={**LAKE_TABLE, "table.datalake.target-file-size": "1kb"})


# ---------------------------------------------------------------- end to end


def lake_numbers(server: ServerProcess) -> tuple[dict[str, Any], dict[str, float]]:
    """The lake's numbers of shop.orders on the status page and as metrics."""
    assert server.coordinator is not None
    page = ClusterStatus(server.coordinator.coordinator, server.coordinator.tablets).snapshot()
    (shown,) = [t for t in page["tables"] if t["table"] == str(PATH)]
    scrape = Scrape(server)
    names = ("data_files", "small_file_share", "snapshots", "last_compaction_timestamp_seconds")
    return shown["lake"]["files"], {name: scrape(f"lakelog_lake_{name}", table=str(PATH)) for name in names}


def test_compaction_keeps_every_record_offset_and_lake_range(spark: Any, server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory(**{"metrics.port": 0})
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, buckets=BUCKETS, properties=COMPACTED_TABLE)
        produced = tier_rounds(spark, server, table, rounds=5, records=4000)
        shown, metrics = lake_numbers(server)
        assert shown == {"data_files": 10, "small_files": 10, "small_file_share": 1.0, "snapshots": 5, "last_compaction_ms": None}
        assert metrics == {"data_files": 10, "small_file_share": 1.0, "snapshots": 5, "last_compaction_timestamp_seconds": 0}
        before = lake_rows(server)
        tiered = latest_lake_snapshot(lake_table(server, PATH))
        tiered_summary = lake_table(server, PATH).current_snapshot().summary
        ranges = {b: (i.lake_log_start_offset, i.lake_log_end_offset) for b, i in conn.admin.describe_buckets(PATH).items()}
        assert len(data_files(server)) == 5 * BUCKETS

        with maintenance(server, spark) as jobs:
            report = jobs.compactor().compact(PATH)
            assert (report.files_replaced, report.files_written, report.records) == (5 * BUCKETS, BUCKETS, produced)
            assert jobs.compactor().compact(PATH).snapshot_id is None, "nothing left to compact"

        # Plain PyIceberg reads the same rows; lakelog's summary and the lake ranges are as they were.
        assert lake_rows(server).equals(before)
        assert len(data_files(server)) == BUCKETS
        iceberg = lake_table(server, PATH)
        summary = iceberg.current_snapshot().summary
        assert iceberg.current_snapshot().snapshot_id == report.snapshot_id
        assert (summary[BUCKET_OFFSETS], summary[BARRIER]) == (tiered_summary[BUCKET_OFFSETS], tiered_summary[BARRIER])
        assert json.loads(summary[COMPACTION]) == {"replaced": 5 * BUCKETS, "written": BUCKETS}
        assert latest_lake_snapshot(iceberg).bucket_offsets == tiered.bucket_offsets
        assert_lake_holds_log(server, PATH)  # the coordinator holds the compacted snapshot
        assert {b: (i.lake_log_start_offset, i.lake_log_end_offset) for b, i in conn.admin.describe_buckets(PATH).items()} == ranges
        # The consistent cut at the same barrier is now the compacted snapshot; the one it rewrote still reads.
        assert conn.admin.get_consistent_lake_snapshots([PATH]) == {PATH: report.snapshot_id}
        assert lake_rows(server, snapshot_id=tiered.snapshot_id).equals(before)
        # The status page and the metrics tell the compaction.
        compacted_at = iceberg.current_snapshot().timestamp_ms
        shown, metrics = lake_numbers(server)
        assert shown == {"data_files": 2, "small_files": 2, "small_file_share": 1.0, "snapshots": 6, "last_compaction_ms": compacted_at}
        assert metrics == {"data_files": 2, "small_file_share": 1.0, "snapshots": 6, "last_compaction_timestamp_seconds": compacted_at / 1000}
        # Rows in each file are sorted by offset, as the lake's sort order says.
        for path in data_files(server):
            offsets = pq.read_table(path.removeprefix("file://"), columns=["__offset"]).column(0)
            assert offsets.to_pylist() == sorted(offsets.to_pylist())

        # Tiering goes on on top of the compacted snapshot.
        tier_rounds(spark, server, table, rounds=1, records=1000, first=produced)
        assert assert_lake_holds_log(server, PATH).num_rows == produced + 1000


def test_a_compaction_and_a_tiering_round_never_lose_each_others_commit(
    spark: Any, server_factory: Callable[..., ServerProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, buckets=BUCKETS, properties=COMPACTED_TABLE)
        produced = tier_rounds(spark, server, table, rounds=3, records=2000)
        with maintenance(server, spark) as jobs, TieringJob(TieringOptions(server.address, tables=(PATH,)), spark=spark) as tier:
            # 1. The compaction wrote its files; a tiering round commits first. The compaction commits
            # again on top of it, carrying the round's new offsets.
            compactor = jobs.compactor()
            write = compactor._write

            rounds: list[Any] = []

            def write_then_a_round_commits(*args: Any) -> Any:
                written = write(*args)
                produce_orders(table, produced, 1000)
                rounds.append(tier.run_round())
                return written

            monkeypatch.setattr(compactor, "_write", write_then_a_round_commits)
            report = compactor.compact(PATH)
            assert report.snapshot_id is not None and report.files_replaced == 3 * BUCKETS
            produced += 1000
            iceberg = lake_table(server, PATH)
            assert iceberg.current_snapshot().snapshot_id == report.snapshot_id
            assert sum(o.log_end_offset for o in latest_lake_snapshot(iceberg).bucket_offsets.values()) == produced
            assert rounds[0].records == 1000
            assert len(data_files(server)) == BUCKETS + rounds[0].tables[0].files  # the compacted files and the round's
            assert assert_lake_holds_log(server, PATH).num_rows == produced

            # 2. A tiering round wrote its files; a compaction commits first. The round plans again.
            tier_rounds(spark, server, table, rounds=1, records=1000, first=produced)
            produced += 1000
            tier_write = tier._write

            def tier_write_then_a_compaction_commits(plans: Any) -> Any:
                written = tier_write(plans)
                monkeypatch.setattr(tier, "_write", tier_write)
                assert jobs.compactor().compact(PATH).snapshot_id is not None
                return written

            produce_orders(table, produced, 1000)
            produced += 1000
            monkeypatch.setattr(tier, "_write", tier_write_then_a_compaction_commits)
            assert tier.run_round().records == 1000
        assert assert_lake_holds_log(server, PATH).num_rows == produced
        assert set(lake_rows(server).column("id").to_pylist()) == set(range(produced))


def test_auto_compaction_compacts_as_it_tiers(spark: Any, server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, buckets=BUCKETS, properties={**COMPACTED_TABLE, "table.datalake.auto-compaction": "true"})
        rounds = AUTO_COMPACTION_MIN_FILES - 1
        produced = tier_rounds(spark, server, table, rounds=rounds, records=1000)
        assert len(data_files(server)) == rounds * BUCKETS, "below the trigger: nothing compacted yet"
        produced = tier_rounds(spark, server, table, rounds=1, records=1000, first=produced)
        assert len(data_files(server)) == BUCKETS, "the round that reached the trigger compacted each bucket"
        assert lake_table(server, PATH).current_snapshot().summary.get(COMPACTION) is not None
        assert assert_lake_holds_log(server, PATH).num_rows == produced


def test_a_lake_only_partition_is_compacted(spark: Any, server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory()
    path = lakelog.TablePath("shop", "clicks")
    schema = pa.schema([("id", pa.int64()), ("dt", pa.string())])
    with lakelog.connect(server.address, {"client.lake.source": "iceberg-arrow"}) as conn:
        conn.admin.create_database("shop", ignore_if_exists=True)
        conn.admin.create_table(path, lakelog.TableDescriptor(schema, BUCKETS, COMPACTED_TABLE, partition_keys=["dt"]))
        for day in ("20260101", "20260102"):
            conn.admin.create_partition(path, {"dt": day})
        table = conn.get_table(path)
        with TieringJob(TieringOptions(server.address, tables=(path,)), spark=spark) as job:
            for index in range(3):
                with table.new_append().create_writer() as writer:
                    for day in ("20260101", "20260102"):
                        for bucket in range(BUCKETS):  # one file per bucket and partition each round
                            ids = pa.array(range(index * 1000 + bucket * 500, index * 1000 + (bucket + 1) * 500), pa.int64())
                            writer.append_arrow(pa.record_batch([ids, pa.array([day] * 500)], schema=schema), bucket=bucket)
                assert job.run_round().records == 2000
        conn.admin.drop_partition(path, {"dt": "20260101"})
        assert {p.partition_name: p.lake_only for p in conn.admin.list_partition_infos(path)} == {"20260101": True, "20260102": False}
        before = lake_rows(server, path)
        assert len(data_files(server, path)) == 3 * 2 * BUCKETS

        with maintenance(server, spark) as jobs:
            assert jobs.compactor().compact(path).files_written == 2 * BUCKETS
        assert lake_rows(server, path).equals(before)
        files = data_files(server, path)
        assert len(files) == 2 * BUCKETS
        assert sum("dt=20260101/" in f for f in files) == BUCKETS, "each partition's files stay in its directory"
        # The lake-only partition reads whole from the lake, through the compacted files, and its
        # timestamp lookups are answered there.
        with conn.get_table(path).new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            got = scan_all(scanner, 6000)
            assert scanner.records_by_tier().get("lake", 0) >= 3000
        old = got.filter(pc.equal(got.column("dt"), "20260101"))
        assert sorted(old.column("id").to_pylist()) == list(range(3000))
        for bucket in range(BUCKETS):
            mine = old.filter(pc.equal(old.column("__bucket"), bucket))
            assert mine.column("__offset").to_pylist() == list(range(1500))
            stamps = mine.column("__timestamp").to_pylist()
            middle = stamps[1000]
            spec = lakelog.OffsetSpec.timestamp(middle)
            assert conn.admin.list_offsets(path, [bucket], spec, partition_name="20260101") == {bucket: stamps.index(middle)}


def test_compaction_while_tiering_and_reading(spark: Any, server_factory: Callable[..., ServerProcess]) -> None:
    """A producer and a tiering job run rounds in a thread; compactions run meanwhile; a reader
    checks every snapshot it sees: each bucket's offsets from 0, no gap, no duplicate."""
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, buckets=BUCKETS, properties=COMPACTED_TABLE)
        produced = tier_rounds(spark, server, table, rounds=3, records=1000)
        stop = threading.Event()
        failures: list[BaseException] = []
        rounds = 0

        def tier() -> None:
            nonlocal produced, rounds
            try:
                with TieringJob(TieringOptions(server.address, tables=(PATH,)), spark=spark) as job:
                    while not stop.is_set():
                        produce_orders(table, produced, 500, batch=250)
                        produced += 500
                        assert job.run_round().records == 500
                        rounds += 1
            except BaseException as error:  # noqa: BLE001 - reported by the test thread
                failures.append(error)

        def read() -> None:
            try:
                while not stop.is_set():
                    rows = lake_rows(server)
                    for bucket in range(BUCKETS):
                        offsets = rows.filter(pc.equal(rows.column("__bucket"), bucket)).column("__offset").to_pylist()
                        assert offsets == list(range(len(offsets))), f"bucket {bucket}: a gap or a duplicate"
            except BaseException as error:  # noqa: BLE001 - reported by the test thread
                failures.append(error)

        threads = [threading.Thread(target=tier, name="tier"), threading.Thread(target=read, name="read")]
        for thread in threads:
            thread.start()
        compactions = []
        try:
            with maintenance(server, spark) as jobs:
                while len([c for c in compactions if c.snapshot_id is not None]) < 3 and not failures:
                    compactions.append(jobs.compactor().compact(PATH))
                    if compactions[-1].snapshot_id is None:
                        stop.wait(0.2)  # until a round adds files to merge
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=120)
        assert not failures, failures
        assert rounds > 0
    lake = assert_lake_holds_log(server, PATH)
    assert lake.num_rows == produced
    assert set(lake.column("id").to_pylist()) == set(range(produced))


def test_files_written_before_a_schema_change_compact_into_the_new_schema(
    spark: Any, server_factory: Callable[..., ServerProcess]
) -> None:
    """Older files read null in an added column and widened in a widened one, as plain PyIceberg
    reads them; the compacted file holds them so."""
    server = server_factory()
    schema = pa.schema([("id", pa.int32()), ("name", pa.string())])
    with lakelog.connect(server.address) as conn:
        conn.admin.create_database("shop", ignore_if_exists=True)
        conn.admin.create_table(PATH, lakelog.TableDescriptor(schema, 1, COMPACTED_TABLE))
        with TieringJob(TieringOptions(server.address, tables=(PATH,)), spark=spark) as job:
            for first in (0, 100):
                with conn.get_table(PATH).new_append().create_writer() as writer:
                    writer.append_arrow(pa.record_batch([pa.array(range(first, first + 100), pa.int32()), pa.array(["a"] * 100)], schema=schema))
                assert job.run_round().records == 100
            conn.admin.alter_table(PATH, [lakelog.TableChange.widen_column("id", pa.int64()), lakelog.TableChange.add_column("note", pa.string())])
            evolved = pa.schema([("id", pa.int64()), ("name", pa.string()), ("note", pa.string())])
            with conn.get_table(PATH).new_append().create_writer() as writer:
                writer.append_arrow(pa.record_batch([pa.array(range(200, 300), pa.int64()), pa.array(["b"] * 100), pa.array(["x"] * 100)], schema=evolved))
            assert job.run_round().records == 100
        before = lake_rows(server)
        with maintenance(server, spark) as jobs:
            assert jobs.compactor().compact(PATH).files_replaced == 3
        after = lake_rows(server)
        assert after.equals(before)
        assert after.column("note").to_pylist() == [None] * 200 + ["x"] * 100
        assert after.schema.field("id").type == pa.int64()
        assert len(data_files(server)) == 1
