"""``spark.readStream.format("lakelog")``: a checkpointed streaming query stopped and restarted
delivers every offset exactly once, across lake, remote and local tiers.

Real parts: the tiered log of test_lake_read (the oldest offsets only in the Iceberg lake, the next in
remote segments, the newest on local disk), the shared local SparkSession, and Spark's own parquet
file sink with its checkpoint: what a user runs.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Iterator

import pyarrow.compute as pc
import pytest

import lakelog
import lakelog.spark
from tests.harness.tables import order_rows
from tests.harness.three_tiers import BUCKETS, TieredLog, build_tiered_log, tier_in_process

NEW_RECORDS = 1500  # per bucket, produced while the query is stopped


@pytest.fixture(scope="module")
def tiered(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredLog]:
    built = build_tiered_log(tmp_path_factory.mktemp("spark-stream"), tier_in_process(spark), {}, nullcontext)
    yield built
    built.server.stop(0)


def _stream(spark: Any, address: str, **options: str) -> Any:
    lakelog.spark.register(spark)
    return spark.readStream.format("lakelog").option("bootstrap", address).option("table", "shop.orders").options(**options).load()


def test_a_checkpointed_stream_stopped_and_restarted_delivers_every_offset_once(spark: Any, tiered: TieredLog, tmp_path: Path) -> None:
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    # Several micro-batches, so the stop falls between (or inside) them.
    frame = _stream(spark, tiered.server.address, startingOffsets="earliest", maxOffsetsPerTrigger="20000")
    writer = frame.writeStream.format("parquet").option("path", str(sink)).option("checkpointLocation", str(checkpoint))

    first = writer.trigger(processingTime="0 seconds").start()
    deadline = time.monotonic() + 240
    while not any(progress["numInputRows"] > 0 for progress in first.recentProgress):
        assert first.exception() is None, first.exception()
        assert time.monotonic() < deadline, "the first micro-batch never finished"
        time.sleep(0.2)
    first.stop()
    read_before_restart = spark.read.parquet(str(sink)).count()
    assert 0 < read_before_restart < tiered.truth.num_rows, "stopped part-way through the history"

    with lakelog.connect(tiered.server.address) as conn:
        with conn.get_table(tiered.path).new_append().create_writer() as producer:
            for bucket in range(BUCKETS):
                producer.append_arrow(order_rows(10_000_000 + bucket * NEW_RECORDS, NEW_RECORDS), bucket=bucket)
            producer.flush()

    second = writer.trigger(availableNow=True).start()
    second.awaitTermination(300)
    assert second.exception() is None, second.exception()

    got = spark.read.parquet(str(sink)).toArrow().sort_by([("__bucket", "ascending"), ("__offset", "ascending")])
    for bucket in range(BUCKETS):
        mine = got.filter(pc.equal(got.column("__bucket"), bucket))
        old = tiered.rows(bucket)
        assert mine.column("__offset").to_pylist() == list(range(old.num_rows + NEW_RECORDS)), "every offset exactly once"
        head = mine.slice(0, old.num_rows)
        for name in old.column_names:
            assert head.column(name).equals(old.column(name).cast(head.schema.field(name).type)), name
        new_ids = mine.slice(old.num_rows).column("id").to_pylist()
        assert new_ids == list(range(10_000_000 + bucket * NEW_RECORDS, 10_000_000 + (bucket + 1) * NEW_RECORDS))


def test_a_stream_from_latest_reads_only_what_comes_after_it_started(spark: Any, tiered: TieredLog) -> None:
    frame = _stream(spark, tiered.server.address)  # startingOffsets defaults to latest, as Kafka's
    query = frame.writeStream.format("memory").queryName("lakelog_latest").trigger(availableNow=True).start()
    query.awaitTermination(300)
    assert query.exception() is None
    assert spark.table("lakelog_latest").count() == 0


def test_a_batch_only_option_on_a_stream_is_refused_by_name(spark: Any, tiered: TieredLog) -> None:
    frame = _stream(spark, tiered.server.address, endingOffsets="latest")
    with pytest.raises(Exception, match="option 'endingOffsets' applies to spark.read only"):
        query = frame.writeStream.format("memory").queryName("lakelog_refused").trigger(availableNow=True).start()
        query.awaitTermination(120)
        raise AssertionError(f"started: {query.exception()}")


def test_offsets_in_the_checkpoint_are_per_bucket_and_limited_per_trigger(spark: Any, tiered: TieredLog, tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    frame = _stream(spark, tiered.server.address, startingOffsets='{"0": 5, "1": 7}', maxOffsetsPerTrigger="10")
    writer = frame.writeStream.format("memory").queryName("lakelog_offsets").option("checkpointLocation", str(checkpoint))
    query = writer.trigger(processingTime="1 second").start()
    deadline = time.monotonic() + 240
    while not query.recentProgress:
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, "the first micro-batch never finished"
        time.sleep(0.2)
    query.stop()
    assert query.recentProgress[0]["numInputRows"] == 10  # 5 per bucket: the limit shared fairly
    first_batch = (checkpoint / "offsets" / "0").read_text().splitlines()[-1]
    assert first_batch.replace(" ", "") == '{"0":10,"1":12}'
