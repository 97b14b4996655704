"""Reading the lake (docs/contract.md, "Tiers" and "Client API"): a union read across lake, remote and local tiers
through both Iceberg LogSources, timestamp lookups, the fallback to an old client, and a warehouse
that disappears mid-read.

Real parts throughout: a server on loopback, the real tiering job (in-process, the shared
SparkSession), a SQLite catalog with a local or a moto ``s3://`` warehouse. One tiered log per
warehouse is built once for the module: two tiering rounds (two data files per bucket), then the
remote TTL expires what the lake holds, so the oldest offsets exist only in the lake, the next ones
in remote segments and the newest on local disk. The truth every test compares with is the whole
log, read before that expiry.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.log_source import FetchContext, LogSource, LookupContext
from lakelog.client.scanner.lake_log_reader import LakeLogReader
from lakelog.client.scanner.read_ahead_budget import ReadAheadBudget
from lakelog.record.meta_columns import with_meta_fields
from lakelog.config import Configuration
from lakelog.lake.iceberg_lake_storage import IcebergLakeStorage
from lakelog.lake_config import credentials_from_environment
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.harness.lake_types import SUPPORTED
from tests.harness.s3 import MotoS3
from tests.harness.tables import ORDERS_SCHEMA, create_table, log_rows, scan_all
from tests.harness.three_tiers import BUCKETS, PROJECTION, TieredLog, assert_rows, build_tiered_log, tier_in_process


@pytest.fixture(scope="module", params=["local", "s3"])
def tiered(request: pytest.FixtureRequest, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredLog]:
    """The session's three-tier table (a local warehouse), or one of its own in a moto ``s3://`` warehouse."""
    if request.param == "local":
        yield request.getfixturevalue("three_tiers")
        return
    moto_s3: MotoS3 = request.getfixturevalue("moto_s3")  # also sets the AWS_* credentials every client uses

    @contextmanager
    def outage() -> Iterator[None]:
        moto_s3.proxy.cut()
        try:
            yield
        finally:
            moto_s3.proxy.restore()

    lake_conf = {
        "datalake.iceberg.warehouse": f"s3://{moto_s3.create_bucket()}/wh",
        "datalake.iceberg.s3.endpoint": moto_s3.endpoint,
        "datalake.iceberg.s3.region": "us-east-1",
    }
    built = build_tiered_log(tmp_path_factory.mktemp("lake-read-s3"), tier_in_process(spark), lake_conf, outage)
    yield built
    built.server.stop(0)


def _connect(tiered: TieredLog, source: str = "iceberg-arrow", **config: Any) -> lakelog.Connection:
    return lakelog.connect(tiered.server.address, {"client.lake.source": source, **config})


def _log_source(conn: lakelog.Connection, path: lakelog.TablePath, source: str) -> LogSource:
    """The plugin's LogSource, made as a client makes it: the cluster's lake config plus own credentials."""
    lake_config = conn.admin.get_lake_config().with_overrides(credentials_from_environment(os.environ))
    info = conn.admin.get_table_info(path)
    return IcebergLakeStorage().create_log_source(info, lake_config, Configuration({"client.lake.source": source}))


# ---------------------------------------------------------------- union read


@pytest.mark.parametrize(
    ("source", "config"),
    [("iceberg-arrow", {}), ("iceberg", {}), ("iceberg", {"client.lake.batch-rows": 500})],
    ids=["iceberg-arrow", "iceberg", "iceberg, files read in many Spark tasks"],
)
def test_subscribe_from_beginning_reads_lake_remote_local_in_order(tiered: TieredLog, source: str, config: dict[str, Any]) -> None:
    with _connect(tiered, source, **config) as conn:
        scanner = conn.get_table(tiered.path).new_scan().project(PROJECTION).create_log_scanner()
        scanner.subscribe_from_beginning()
        got = scan_all(scanner, tiered.truth.num_rows)
        assert not scanner.poll(timeout_ms=200)
        assert sum(scanner.remote_read_stats().values()) > 0, "the middle of the log came from remote segments"
        scanner.close()
    assert got.schema.names == [*PROJECTION, "__bucket", "__offset", "__timestamp"]
    for bucket in range(BUCKETS):
        mine = got.filter(pc.equal(got.column("__bucket"), bucket))
        offsets = mine.column("__offset").to_pylist()
        assert offsets == list(range(tiered.buckets[bucket].high_watermark)), "in order, no gap, no duplicate"
        assert_rows(mine, tiered.rows(bucket), PROJECTION)


@pytest.mark.parametrize("where", ["inside the lake", "last lake-only", "lake end - 1", "lake end", "local start"])
def test_subscribe_at_an_offset_is_exact(tiered: TieredLog, where: str) -> None:
    with _connect(tiered) as conn:
        for bucket in range(BUCKETS):
            info = tiered.buckets[bucket]
            offset = {
                "inside the lake": 1234,
                "last lake-only": tiered.lake_only_end(bucket) - 1,
                "lake end - 1": info.lake_log_end_offset - 1,
                "lake end": info.lake_log_end_offset,
                "local start": info.local_log_start_offset,
            }[where]
            lake_only = where in ("inside the lake", "last lake-only")
            if lake_only:
                assert 0 <= offset < tiered.lake_only_end(bucket), f"{where}: offset {offset} is not lake-only"
            count = min(2500, info.high_watermark - offset)
            with conn.get_table(tiered.path).new_scan().create_log_scanner() as scanner:
                scanner.subscribe(bucket, offset)
                got = scan_all(scanner, count).slice(0, count)
                assert_rows(got, tiered.rows(bucket, offset, offset + count), ORDERS_SCHEMA.names)
                if lake_only:
                    assert scanner.records_by_tier().get("lake", 0) > 0, scanner.records_by_tier()


def test_the_spark_source_continues_at_the_lake_end(tiered: TieredLog, spark: Any) -> None:
    with _connect(tiered, "iceberg") as conn, conn.get_table(tiered.path).new_scan().create_log_scanner() as scanner:
        end = tiered.buckets[1].lake_log_end_offset
        scanner.subscribe(1, end - 1)
        assert_rows(scan_all(scanner, 10).slice(0, 10), tiered.rows(1, end - 1, end + 9), ORDERS_SCHEMA.names)


@pytest.mark.parametrize("source", ["iceberg-arrow", "iceberg"])
def test_every_supported_type_reads_back_as_the_log_has_it(
    source: str, spark: Any, server_factory: Callable[..., ServerProcess]
) -> None:
    """The lake widens some types (int8 to int, timestamp[s] to timestamp[us], ...); a LogSource
    gives the log's own types and values back, projected, with the log's meta columns."""
    schema = pa.schema([pa.field(f"c{i}", data_type) for i, (data_type, _, _) in enumerate(SUPPORTED)])
    rows = pa.table([pa.array(values, data_type) for data_type, _, values in SUPPORTED], schema=schema)
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, schema=schema, properties={"table.datalake.enabled": "true"})
        with table.new_append().create_writer() as writer:
            writer.append_arrow(rows.to_batches()[0])
            writer.flush()
        with TieringJob(TieringOptions(server.address), spark=spark) as job:
            job.run_round()
        snapshot_id = conn.admin.get_lake_snapshot(table.path).snapshot_id
        log = log_rows(server.address, table.path)
        log_source = _log_source(conn, table.path, source)
    projection = list(reversed(range(len(SUPPORTED))))
    context = FetchContext(0, rows.num_rows, "", 0, snapshot_id, projection)
    got = pa.Table.from_batches(list(log_source.fetch_log_records(context)))
    assert got.equals(log.select([*(f"c{i}" for i in projection), "__bucket", "__offset", "__timestamp"]))


# ---------------------------------------------------------------- timestamps


def _probes(tiered: TieredLog, bucket: int) -> dict[str, int]:
    """Timestamps in each tier and on each tier boundary of ``bucket``."""
    info = tiered.buckets[bucket]
    ts = tiered.timestamps(bucket)
    lake_max = ts[info.lake_log_end_offset - 1]
    return {
        "before everything": 0,
        "first record": ts[0],
        "inside the lake": ts[info.lake_log_end_offset // 2],
        "lake max": lake_max,
        "just past the lake": lake_max + 1,
        "last lake-only": ts[tiered.lake_only_end(bucket) - 1],
        "remote": ts[(info.remote_log_end_offset + info.lake_log_end_offset) // 2],
        "local start": ts[info.local_log_start_offset],
        "last record": ts[-1],
        "after everything": ts[-1] + 1,
    }


def test_timestamp_lookups_match_the_full_log(tiered: TieredLog) -> None:
    with _connect(tiered) as conn:
        table = conn.get_table(tiered.path)
        for bucket in range(BUCKETS):
            for name, ms in _probes(tiered, bucket).items():
                want = {bucket: tiered.offset_for(bucket, ms)}
                assert conn.admin.list_offsets(tiered.path, [bucket], lakelog.OffsetSpec.timestamp(ms)) == want, name
                with table.new_scan().create_log_scanner() as scanner:
                    scanner.subscribe_from_timestamp(ms, [bucket])
                    assert scanner.positions() == want, name
        assert conn.admin.list_offsets(tiered.path, spec=lakelog.OffsetSpec.earliest()) == {b: 0 for b in range(BUCKETS)}


def test_timestamp_lookups_through_spark(tiered: TieredLog, spark: Any) -> None:
    """One Spark job per lookup the lake answers: one bucket is enough."""
    with _connect(tiered, "iceberg") as conn:
        for name, ms in _probes(tiered, 1).items():
            want = {1: tiered.offset_for(1, ms)}
            assert conn.admin.list_offsets(tiered.path, [1], lakelog.OffsetSpec.timestamp(ms)) == want, name


def test_the_log_source_refuses_a_timestamp_past_the_snapshot(tiered: TieredLog) -> None:
    with _connect(tiered) as conn:
        source = _log_source(conn, tiered.path, "iceberg-arrow")
        snapshot = conn.admin.get_lake_snapshot(tiered.path)
    lake_max = snapshot.bucket_offsets[0].log_max_timestamp
    found = source.lookup_log_offset_by_timestamp(LookupContext("", 0, lake_max, snapshot.snapshot_id))
    assert found == tiered.offset_for(0, lake_max)
    with pytest.raises(lakelog.InvalidTimestampError, match=f"timestamp {lake_max + 1} is past"):
        source.lookup_log_offset_by_timestamp(LookupContext("", 0, lake_max + 1, snapshot.snapshot_id))


# ---------------------------------------------------------------- fallback


def test_an_old_client_does_not_see_the_lake(tiered: TieredLog) -> None:
    starts = {b: tiered.lake_only_end(b) for b in range(BUCKETS)}
    with _connect(tiered, **{"client.lake.enabled": "false"}) as conn:
        assert conn.admin.list_offsets(tiered.path, spec=lakelog.OffsetSpec.earliest()) == starts
        assert conn.admin.list_offsets(tiered.path, [0], lakelog.OffsetSpec.timestamp(0)) == {0: starts[0]}
        with conn.get_table(tiered.path).new_scan().create_log_scanner() as scanner:
            scanner.subscribe(0, 0)
            with pytest.raises(lakelog.OffsetOutOfRangeError) as info:
                for _ in range(20):
                    scanner.poll(timeout_ms=500)
            assert (info.value.bucket, info.value.offset, info.value.earliest) == (0, 0, starts[0])


BLOCKED_CLIENT = textwrap.dedent(
    """
    import logging, sys
    address, path, blocked, source = sys.argv[1:]
    for name in blocked.split(","):
        sys.modules[name] = None  # as if it were not installed
    logging.basicConfig(level=logging.INFO, format="LOG %(levelname)s %(message)s")
    import lakelog
    path = lakelog.TablePath(*path.split("."))
    with lakelog.connect(address, {"client.lake.source": source}) as conn:
        print("earliest", conn.admin.list_offsets(path, [0], lakelog.OffsetSpec.earliest())[0])
        with conn.get_table(path).new_scan().create_log_scanner() as scanner:
            scanner.subscribe(0, 0)
            try:
                while not (records := scanner.poll(timeout_ms=500)):
                    pass
                print("first", records.records(0)[0].offset)
            except lakelog.OffsetOutOfRangeError as error:
                print("out of range", error.offset, error.earliest)
    """
)


@pytest.mark.parametrize(
    "blocked, source, missing",
    [("pyiceberg,pyspark", "iceberg", "pyiceberg"), ("pyspark", "iceberg", "pyspark"), ("pyspark", "iceberg-arrow", None)],
)
def test_a_client_without_the_lake_libraries_falls_back_and_says_why(
    tiered: TieredLog, blocked: str, source: str, missing: str | None
) -> None:
    """A separate interpreter in which the libraries cannot be imported; ``iceberg-arrow`` needs no PySpark."""
    result = subprocess.run(
        [sys.executable, "-c", BLOCKED_CLIENT, tiered.server.address, str(tiered.path), blocked, source],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    why = [line for line in result.stderr.splitlines() if "reading without the lake" in line]
    if missing is None:
        assert result.stdout.splitlines() == ["earliest 0", "first 0"]
        assert why == [], result.stderr
        return
    start = tiered.lake_only_end(0)
    assert result.stdout.splitlines() == [f"earliest {start}", f"out of range 0 {start}"]
    assert len(why) == 1, result.stderr
    assert why[0].startswith("LOG WARNING") and f"{tiered.path}:" in why[0] and missing in why[0]


# ---------------------------------------------------------------- failures


def test_a_warehouse_that_disappears_mid_read_is_a_lake_error_and_a_retry_continues(tiered: TieredLog) -> None:
    """Small lake batches read one row group at a time, and a read-ahead of a few of them, so the
    reader is still in the bucket's first data file when the warehouse goes (without the small
    read-ahead a fast reader had opened every file by then); the second file cannot be opened then."""
    end = tiered.buckets[0].high_watermark
    config = {"client.lake.batch-rows": 1000, "client.lake.read-threads": 1, "client.scanner.max-buffered-bytes": "64kb"}
    with _connect(tiered, **config) as conn:
        scanner = conn.get_table(tiered.path).new_scan().create_log_scanner()
        scanner.subscribe(0, 0)
        polled = [scan_all(scanner, 1)]
        with tiered.outage():
            failure = _poll_until_lake_error(scanner, polled)
            assert failure.retriable
            assert "cannot read lake data file" in str(failure) or "cannot plan a read" in str(failure)
            got = sum(t.num_rows for t in polled)
            assert 0 < got < tiered.buckets[0].lake_log_end_offset
            assert scanner.positions() == {0: got}, "the position stops at the last record returned"
            _poll_until_lake_error(scanner, polled)  # a retry while the warehouse is away fails the same way
            assert scanner.positions() == {0: got}
        polled.append(scan_all(scanner, end - got))
        scanner.close()
    assert_rows(pa.concat_tables(polled), tiered.rows(0), ORDERS_SCHEMA.names)


def _poll_until_lake_error(scanner: lakelog.LogScanner, polled: list[pa.Table]) -> lakelog.LakeError:
    """Poll (adding what arrives to ``polled``) until a poll raises LakeError."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            polled.append(scanner.poll_arrow(timeout_ms=200))
        except lakelog.LakeError as error:
            return error
    raise AssertionError("the lake read never failed")


class _ListedSource(LogSource):
    """A LogSource that returns the given offsets, for what no real lake should ever do."""

    def __init__(self, *offsets: list[int]) -> None:
        self._offsets = offsets

    def lookup_log_offset_by_timestamp(self, context: LookupContext) -> int:
        raise NotImplementedError

    def fetch_log_records(self, context: FetchContext) -> Iterator[pa.RecordBatch]:
        for offsets in self._offsets:
            rows = {"id": offsets, "__bucket": [3] * len(offsets), "__offset": offsets, "__timestamp": [7] * len(offsets)}
            yield pa.RecordBatch.from_pydict(rows, schema=SCHEMA)


SCHEMA = with_meta_fields(pa.schema([("id", pa.int64())]))


@pytest.mark.parametrize(
    "batches, message",
    [
        ([[10, 11], [13]], "returned offset 13 where offset 12 was expected (a gap, or offsets out of order)"),
        ([[10, 11], [11, 12]], "returned offset 11 where offset 12 was expected (a duplicate, or offsets out of order)"),
        ([[10, 12, 11]], "returned offset 12 where offset 11 was expected (a gap, or offsets out of order)"),
        ([[10, 11]], "ends at offset 12, but the server said it holds offsets up to 14 (a gap)"),
    ],
)
def test_a_lake_read_with_a_gap_or_a_duplicate_is_a_lake_data_error(batches: list[list[int]], message: str) -> None:
    context = FetchContext(10, 15, "", 3, 99, None)
    reader = LakeLogReader(_ListedSource(*batches), context, SCHEMA, "shop.orders bucket 3", 20, ReadAheadBudget(1 << 20), lambda: None)
    deadline = time.monotonic() + 10
    with pytest.raises(lakelog.LakeDataError) as error:
        while time.monotonic() < deadline:
            reader.read(1 << 20)
    assert str(error.value).startswith("shop.orders bucket 3: lake snapshot 99")
    assert message in str(error.value)
    reader.close()
