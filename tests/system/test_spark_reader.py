"""``spark.read.format("lakelog")``: the DataFrame holds exactly what a LogScanner reads, over the
whole history (lake, remote and local tiers), with projection, offset and timestamp ranges, and
partitions cut inside buckets; bad input fails with an error that names the table or the option.

Real parts: a server on loopback, the tiered log of test_lake_read (built once for the module: the
oldest offsets only in the Iceberg lake, the next in remote segments, the newest on local disk), and
the shared local SparkSession, whose Python workers connect to the server themselves.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.errors import PySparkException

import lakelog
import lakelog.spark
from lakelog.client.bucket_assigner import BucketAssigner
from lakelog.errors import InvalidConfigError
from lakelog.metadata import OffsetSpec
from lakelog.server.server_process import ServerProcess
from lakelog.spark.read_options import parse_read_options
from lakelog.spark.spark_schema import spark_schema
from tests.harness.lake_types import SUPPORTED
from tests.harness.tables import ORDERS_SCHEMA, create_table, order_rows, scan_all
from tests.harness.three_tiers import BUCKETS, TieredLog

META = ["__bucket", "__offset", "__timestamp"]


@pytest.fixture(scope="module")
def tiered(three_tiers: TieredLog) -> TieredLog:
    """The session's three-tier table: these tests only read it."""
    return three_tiers


@pytest.fixture(scope="module")
def scanned(tiered: TieredLog) -> pa.Table:
    """What one LogScanner reads from offset 0 today, by bucket and offset: the truth for the reader.
    It must have come from all three tiers, so the reader is compared across each of them."""
    with lakelog.connect(tiered.server.address, {"client.lake.source": "iceberg-arrow"}) as conn:
        with conn.get_table(tiered.path).new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            rows = scan_all(scanner, tiered.truth.num_rows)
            assert all(scanner.records_by_tier()[tier] > 0 for tier in ("lake", "remote", "local")), scanner.records_by_tier()
    rows = rows.sort_by([("__bucket", "ascending"), ("__offset", "ascending")])
    assert rows.equals(tiered.truth), "the scanner reads the log as it was before the lake took over its oldest part"
    return rows


def _read(spark: Any, address: str, table: str = "shop.orders", **options: str) -> Any:
    lakelog.spark.register(spark)
    return spark.read.format("lakelog").option("bootstrap", address).option("table", table).options(**options).load()


def _sorted_arrow(frame: Any) -> pa.Table:
    return frame.toArrow().sort_by([("__bucket", "ascending"), ("__offset", "ascending")])


def _assert_same_rows(got: pa.Table, want: pa.Table) -> None:
    """Same columns in the same order, and per column the same values, row for row."""
    assert got.column_names == want.column_names
    assert got.num_rows == want.num_rows
    for name in want.column_names:
        assert got.column(name).equals(want.column(name)), name


def _where(rows: pa.Table, predicate: Callable[[int, pa.Table], pa.Array]) -> pa.Table:
    """``rows`` filtered per bucket by ``predicate(bucket, rows_of_that_bucket)``."""
    parts = []
    for bucket in range(BUCKETS):
        mine = rows.filter(pc.equal(rows.column("__bucket"), bucket))
        parts.append(mine.filter(predicate(bucket, mine)))
    return pa.concat_tables(parts)


# ---------------------------------------------------------------- whole history and projection


def test_the_whole_history_is_what_the_scanner_reads(tiered: TieredLog, scanned: pa.Table, spark: Any) -> None:
    frame = _read(spark, tiered.server.address)
    assert frame.columns == [*ORDERS_SCHEMA.names, *META]
    assert frame.rdd.getNumPartitions() == BUCKETS, "one partition per bucket below maxRecordsPerPartition"
    _assert_same_rows(_sorted_arrow(frame), scanned)


def test_columns_choose_and_order_the_columns(tiered: TieredLog, scanned: pa.Table, spark: Any) -> None:
    frame = _read(spark, tiered.server.address, columns="amount, id")
    _assert_same_rows(_sorted_arrow(frame), scanned.select(["amount", "id", *META]))


def test_big_buckets_are_split_into_several_partitions(tiered: TieredLog, scanned: pa.Table, spark: Any) -> None:
    frame = _read(spark, tiered.server.address, maxRecordsPerPartition="7000", columns="id")
    high_watermarks = [tiered.buckets[b].high_watermark for b in range(BUCKETS)]
    assert frame.rdd.getNumPartitions() == sum(math.ceil(hw / 7000) for hw in high_watermarks)
    _assert_same_rows(_sorted_arrow(frame), scanned.select(["id", *META]))


def test_load_takes_the_table_as_its_path(tiered: TieredLog, scanned: pa.Table, spark: Any) -> None:
    lakelog.spark.register(spark)
    frame = spark.read.format("lakelog").option("bootstrap", tiered.server.address).load(str(tiered.path))
    assert frame.count() == scanned.num_rows


# ---------------------------------------------------------------- ranges


def test_an_offset_range_per_bucket_across_the_tiers(tiered: TieredLog, scanned: pa.Table, spark: Any) -> None:
    # Bucket 0 starts inside the lake, bucket 1 at the last lake-only offset; both end on local disk.
    starts = {0: 1234, 1: tiered.lake_only_end(1) - 1}
    end = tiered.buckets[0].local_log_start_offset + 10
    frame = _read(spark, tiered.server.address, startingOffsets=json.dumps(starts), endingOffsets=str(end))
    want = _where(
        scanned, lambda b, rows: pc.and_(pc.greater_equal(rows.column("__offset"), starts[b]), pc.less(rows.column("__offset"), end))
    )
    _assert_same_rows(_sorted_arrow(frame), want)


def test_one_starting_offset_for_every_bucket_and_an_end_past_the_log(tiered: TieredLog, scanned: pa.Table, spark: Any) -> None:
    frame = _read(spark, tiered.server.address, startingOffsets="45000", endingOffsets="999999999", columns="name")
    want = scanned.filter(pc.greater_equal(scanned.column("__offset"), 45000)).select(["name", *META])
    _assert_same_rows(_sorted_arrow(frame), want)


def test_a_timestamp_range_is_half_open(tiered: TieredLog, scanned: pa.Table, spark: Any) -> None:
    # From a timestamp only the lake holds to one on local disk, both taken from bucket 0's records.
    start_ms = tiered.timestamps(0)[tiered.lake_only_end(0) // 2]
    end_ms = tiered.timestamps(0)[tiered.buckets[0].local_log_start_offset + 1]
    frame = _read(spark, tiered.server.address, startingTimestamp=str(start_ms), endingTimestamp=str(end_ms))
    stamps = scanned.column("__timestamp")
    want = scanned.filter(pc.and_(pc.greater_equal(stamps, start_ms), pc.less(stamps, end_ms)))
    assert 0 < want.num_rows < scanned.num_rows
    _assert_same_rows(_sorted_arrow(frame), want)


# ---------------------------------------------------------------- filter pushdown


def _contiguous(rows: pa.Table) -> int:
    """How many offsets ``rows`` span (they are one bucket's, in order, with no gap)."""
    offsets = rows.column("__offset").to_pylist()
    assert offsets == list(range(offsets[0], offsets[-1] + 1))
    return len(offsets)


def test_offset_and_bucket_filters_narrow_the_ranges_read(tiered: TieredLog, scanned: pa.Table, spark: Any) -> None:
    start, end = tiered.lake_only_end(1) - 10, tiered.buckets[1].local_log_start_offset + 5
    frame = _read(spark, tiered.server.address, maxRecordsPerPartition="1000", columns="id").where(
        f"__bucket = 1 AND __offset >= {start} AND __offset < {end} AND id % 2 = 0"
    )
    # Without pushdown every bucket's whole history would be planned: sum(ceil(hw / 1000)) partitions.
    assert frame.rdd.getNumPartitions() == math.ceil((end - start) / 1000)
    offsets, ids = scanned.column("__offset"), scanned.column("id")
    want = scanned.filter(
        pc.and_(
            pc.and_(pc.equal(scanned.column("__bucket"), 1), pc.equal(pc.bit_wise_and(ids, 1), 0)),
            pc.and_(pc.greater_equal(offsets, start), pc.less(offsets, end)),
        )
    )
    assert want.num_rows > 0
    _assert_same_rows(_sorted_arrow(frame), want.select(["id", *META]))


def test_timestamp_filters_become_offset_ranges(tiered: TieredLog, scanned: pa.Table, spark: Any) -> None:
    """From a timestamp only the lake holds to one on local disk, both ends inclusive, buckets by IN."""
    start_ms = tiered.timestamps(0)[tiered.lake_only_end(0) // 2]
    end_ms = tiered.timestamps(0)[tiered.buckets[0].local_log_start_offset + 1]
    frame = _read(spark, tiered.server.address, maxRecordsPerPartition="1000").where(
        f"__timestamp >= {start_ms} AND __timestamp <= {end_ms} AND __bucket IN (0)"
    )
    stamps = scanned.column("__timestamp")
    want = scanned.filter(
        pc.and_(pc.equal(scanned.column("__bucket"), 0), pc.and_(pc.greater_equal(stamps, start_ms), pc.less_equal(stamps, end_ms)))
    )
    assert frame.rdd.getNumPartitions() == math.ceil(_contiguous(want) / 1000)
    _assert_same_rows(_sorted_arrow(frame), want)


def test_an_empty_range_is_an_empty_frame(tiered: TieredLog, spark: Any) -> None:
    frame = _read(spark, tiered.server.address, startingOffsets="latest")
    assert frame.collect() == []


def test_a_table_only_on_local_disk(server_factory: Callable[..., ServerProcess], spark: Any) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, "local_only", buckets=3)
        with table.new_append().create_writer() as writer:
            for index, first in enumerate(range(0, 9000, 700)):
                writer.append_arrow(order_rows(first, min(700, 9000 - first)), bucket=index % 3)
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            scanned = scan_all(scanner, 9000).sort_by([("__bucket", "ascending"), ("__offset", "ascending")])
            assert scanner.records_by_tier()["local"] == 9000
    frame = _read(spark, server.address, "shop.local_only")
    assert frame.rdd.getNumPartitions() == 3
    _assert_same_rows(_sorted_arrow(frame), scanned)


# ---------------------------------------------------------------- types


def test_every_lake_type_reads_back_through_spark(server_factory: Callable[..., ServerProcess], spark: Any) -> None:
    """Every type a lake table can hold comes back with the values the scanner returns; those Spark
    has no type for (unsigned, half floats, 64-bit dates, 32-bit times) widened without loss."""
    schema = pa.schema([pa.field(f"c{i}", data_type) for i, (data_type, _, _) in enumerate(SUPPORTED)])
    batch = pa.record_batch([pa.array(values, data_type) for data_type, _, values in SUPPORTED], schema=schema)
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, "typed", schema)
        with table.new_append().create_writer() as writer:
            writer.append_arrow(batch)
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            scanned = scan_all(scanner, batch.num_rows)
    got = _read(spark, server.address, "shop.typed").toArrow()
    target = got.schema
    assert target.names == [*schema.names, *META]
    for name in schema.names:
        assert got.column(name).to_pylist() == scanned.column(name).cast(target.field(name).type).to_pylist(), name
        assert scanned.column(name).cast(target.field(name).type).cast(schema.field(name).type).equals(scanned.column(name)), (
            f"{name}: widening to {target.field(name).type} loses nothing"
        )


def test_the_spark_schema_of_types_spark_lacks() -> None:
    widened = spark_schema(
        pa.schema([("u8", pa.uint8()), ("u32", pa.uint32()), ("u64", pa.uint64()), ("half", pa.float16()), ("d", pa.date64())])
    )
    assert widened.simpleString() == (
        "struct<u8:smallint,u32:bigint,u64:decimal(20,0),half:float,d:date,__bucket:int,__offset:bigint,__timestamp:bigint>"
    )


# ---------------------------------------------------------------- errors


def test_an_unknown_table_fails_naming_it(tiered: TieredLog, spark: Any) -> None:
    with pytest.raises(PySparkException, match=r"TableNotExistError: table shop\.nowhere does not exist"):
        _read(spark, tiered.server.address, table="shop.nowhere")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"endingOffset": "10"}, "unknown lakelog Spark option 'endingoffset'"),
        ({"startingOffsets": "ten"}, "option 'startingOffsets': 'ten' is not an integer"),
        ({"columns": "id,price"}, "option 'columns' names column 'price'"),
        ({"startingTimestamp": "1", "startingOffsets": "0"}, "options 'startingOffsets' and 'startingTimestamp' exclude each other"),
        ({"conf.client.no-such-key": "1"}, "option conf.*: unknown configuration key 'client.no-such-key'"),
        ({"table": "orders"}, "option 'table': invalid table path 'orders'"),
    ],
)
def test_a_bad_option_fails_naming_it(tiered: TieredLog, spark: Any, options: dict[str, str], message: str) -> None:
    with pytest.raises(PySparkException, match=f"InvalidConfigError: .*{re.escape(message)}"):
        _read(spark, tiered.server.address, **options)


def test_a_bucket_the_table_lacks_fails_naming_the_option(tiered: TieredLog, spark: Any) -> None:
    frame = _read(spark, tiered.server.address, endingOffsets='{"7": 5}')
    with pytest.raises(PySparkException, match=r"option 'endingOffsets' names bucket 7, but shop\.orders has buckets 0\.\.1"):
        frame.collect()


def test_options_are_checked_before_anything_connects() -> None:
    with pytest.raises(InvalidConfigError, match="'bootstrap' is required"):
        parse_read_options({"table": "shop.orders"})
    with pytest.raises(InvalidConfigError, match="Spark tasks read the lake with 'iceberg-arrow'"):
        parse_read_options({"bootstrap": "h:1", "table": "shop.orders", "conf.client.lake.source": "iceberg"})
    with pytest.raises(InvalidConfigError, match="'maxRecordsPerPartition' must be positive"):
        parse_read_options({"bootstrap": "h:1", "table": "shop.orders", "maxrecordsperpartition": "0"})
    parsed = parse_read_options({"BOOTSTRAP": "h:1", "path": "shop.orders", "endingoffsets": '{"1": 4}', "conf.client.scanner.fetch.max-bytes": "1mb"})
    assert (parsed.path, dict(parsed.end.per_bucket), parsed.end.default) == (lakelog.TablePath("shop", "orders"), {1: 4}, OffsetSpec.latest())
    assert parsed.client_config == {"client.scanner.fetch.max-bytes": 1 << 20, "client.lake.source": "iceberg-arrow"}


def test_a_bucket_key_filter_reads_only_the_buckets_its_values_hash_to(server: ServerProcess, spark: Any) -> None:
    """``WHERE user_id = 7`` on a table bucketed by ``user_id`` plans that key's bucket alone; the
    rows are exact (the bucket's other keys are filtered by Spark); a filter that does not pin every
    key value reads every bucket."""
    schema = pa.schema([("user_id", pa.int64()), ("page", pa.string())])
    path = lakelog.TablePath("shop", "visits")
    rows = pa.table({"user_id": [n % 50 for n in range(2000)], "page": [f"p{n}" for n in range(2000)]}, schema=schema)
    with lakelog.connect(server.address) as conn:
        conn.admin.create_database("shop", ignore_if_exists=True)
        conn.admin.create_table(path, lakelog.TableDescriptor(schema, 8, bucket_keys=["user_id"]))
        with conn.get_table(path).new_append().create_writer() as writer:
            writer.append_arrow(rows)
        assigner = BucketAssigner.for_table(conn.admin.get_table_info(path))
    buckets = {key: assigner.row_bucket({"user_id": key}) for key in range(50)}
    assert len(set(buckets.values())) == 8

    def pages(where: str, partitions: int, keep: Callable[[int], bool]) -> None:
        frame = _read(spark, server.address, table=str(path)).where(where)
        assert frame.rdd.getNumPartitions() == partitions, where
        assert sorted(frame.toArrow().column("page").to_pylist()) == sorted(f"p{n}" for n in range(2000) if keep(n % 50)), where

    pages("user_id = 7", 1, lambda key: key == 7)
    pages("user_id IN (7, 8, 9)", len({buckets[7], buckets[8], buckets[9]}), lambda key: key in (7, 8, 9))
    pages("user_id > 47", 8, lambda key: key > 47)
