"""The tiering job end to end: a real server on loopback (with a remote tier), real Spark tasks,
a real Iceberg catalog, checked by reading the Iceberg table with PyIceberg."""

from __future__ import annotations

from typing import Any, Callable

import boto3
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import lakelog
from lakelog.lake.snapshot_summary import BUCKET_OFFSETS, COMMIT_USER
from lakelog.server.server_process import ServerProcess
from lakelog.log_ranges import bucket_ranges
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.harness.lake_tier import LAKE_TABLE, REMOTE_TIER, assert_lake_holds_log, lake_table, run_tier, wait_for_remote
from tests.harness.s3 import ACCESS_KEY, REGION, SECRET_KEY, MotoS3
from tests.harness.tables import create_table, produce_orders

BUCKETS = 4


def test_tier_copies_every_offset_exactly_once(spark: Any, server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory(**REMOTE_TIER)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, buckets=BUCKETS, properties={**LAKE_TABLE, "table.log.tiered.local-segments": "1"})
        produce_orders(table, 0, 150_000)
        wait_for_remote(conn, table.path)

        with TieringJob(TieringOptions(server.address), spark=spark) as job:
            report = job.run_round()
            assert (report.records, [t.files for t in report.tables]) == (150_000, [BUCKETS])
            assert job.run_round().records == 0
        assert_lake_holds_log(server, table.path)

        produce_orders(table, 150_000, 50_000)
        result = run_tier(server.address, "--table", "shop.orders")
        assert result.returncode == 0, result.stderr
        assert "round 1: 50000 records" in result.stderr
        lake = assert_lake_holds_log(server, table.path)
        assert lake.num_rows == 200_000
        # The coordinator told the bucket leaders what the lake holds.
        buckets = conn.admin.describe_buckets(table.path)
        assert {b: (i.lake_log_start_offset, i.lake_log_end_offset) for b, i in buckets.items()} == {
            b: (0, i.high_watermark) for b, i in buckets.items()
        }

    snapshots = [s for s in lake_table(server, table.path).snapshots() if s.summary and BUCKET_OFFSETS in s.summary]
    assert len(snapshots) == 2
    assert len({s.summary[COMMIT_USER] for s in snapshots}) == 2
    _assert_dictionaries_only_where_values_repeat(lake_table(server, table.path))


def test_tier_into_an_s3_warehouse(spark: Any, server_factory: Callable[..., ServerProcess], moto_s3: MotoS3) -> None:
    bucket = moto_s3.create_bucket()
    secrets = {"datalake.iceberg.s3.access-key-id": ACCESS_KEY, "datalake.iceberg.s3.secret-access-key": SECRET_KEY}
    server = server_factory(
        **{
            "datalake.iceberg.warehouse": f"s3://{bucket}/wh",
            "datalake.iceberg.s3.endpoint": moto_s3.endpoint,
            "datalake.iceberg.s3.region": REGION,
            **secrets,
        }
    )
    with lakelog.connect(server.address) as conn:
        handed_out = conn.admin.get_lake_config().catalog_properties
        assert handed_out["s3.endpoint"] == moto_s3.endpoint
        assert not {"s3.access-key-id", "s3.secret-access-key"} & set(handed_out)
        table = create_table(conn, buckets=BUCKETS, properties=LAKE_TABLE)
        produce_orders(table, 0, 200_000)

        # The job brings its own credentials, as flags.
        with TieringJob(TieringOptions(server.address, client_config=secrets), spark=spark) as job:
            assert job.run_round().records == 200_000
        assert assert_lake_holds_log(server, table.path).num_rows == 200_000

    s3 = boto3.client(
        "s3", endpoint_url=moto_s3.endpoint, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, region_name=REGION
    )
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="wh/shop/orders/data/")["Contents"]]
    assert sorted({key.split("/")[4] for key in keys}) == [f"__bucket={b}" for b in range(BUCKETS)]
    assert all(key.endswith(".parquet") for key in keys)


def test_cli_tiers_only_lake_enabled_tables(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        create_table(conn, name="plain")
    result = run_tier(server.address, "--table", "shop.plain")
    assert result.returncode == 1
    assert "shop.plain is not lake-enabled" in result.stderr


def test_record_budget_is_shared_fairly_by_the_buckets() -> None:
    starts = {0: 0, 1: 100, 2: 0, 3: 7}
    ends = {0: 10, 1: 1_100, 2: 5_000, 3: 7}
    assert bucket_ranges(starts, ends, None).ranges == {0: (0, 10), 1: (100, 1_100), 2: (0, 5_000)}
    # bucket 0 needs 10 of its 333: the rest goes to the others
    assert bucket_ranges(starts, ends, 1_000).ranges == {0: (0, 10), 1: (100, 595), 2: (0, 495)}
    assert bucket_ranges(starts, ends, 2).ranges == {1: (100, 101), 2: (0, 1)}


def test_rounds_with_a_budget_tier_every_lake_table_and_survive_a_broken_one(
    spark: Any, server_factory: Callable[..., ServerProcess]
) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        orders = create_table(conn, buckets=BUCKETS, properties=LAKE_TABLE)
        returns = create_table(conn, name="returns", buckets=2, properties=LAKE_TABLE)
        broken = create_table(conn, name="broken", properties=LAKE_TABLE)
        create_table(conn, name="plain")
        for table, count in ((orders, 9_000), (returns, 3_000), (broken, 10)):
            produce_orders(table, 0, count)
        lake_table(server, broken.path).catalog.drop_table(("shop", "broken"))

        with TieringJob(TieringOptions(server.address, max_records_per_round=2_500), spark=spark) as job:
            first = job.run_round()
            assert {str(t.path): t.records for t in first.tables} == {"shop.orders": 2_500, "shop.returns": 2_500}
            assert list(first.failed) == [broken.path]
            while job.run_round().records:
                pass
        for table in (orders, returns):
            assert_lake_holds_log(server, table.path)


def _assert_dictionaries_only_where_values_repeat(lake: Any) -> None:
    """The tiering job drops a column chunk's dictionary for plain pages once it reaches 128 KB: a
    dictionary of distinct values (ids, names, offsets) is pages of indices zstd cannot shrink. The
    proof: a tiered file against the same rows written with Arrow's default dictionary limit (1 MB,
    a whole row group of 8-byte values)."""
    files = lake.inspect.files()
    largest = pc.index(files.column("record_count"), pc.max(files.column("record_count"))).as_py()
    path, size = files.column("file_path")[largest].as_py(), files.column("file_size_in_bytes")[largest].as_py()
    with lake.io.new_input(path).open() as stream:
        rows = pq.read_table(stream)
    default = pa.BufferOutputStream()
    pq.write_table(rows, default, compression="zstd", write_page_checksum=True)
    assert size < default.getvalue().size * 0.7, (size, default.getvalue().size)
