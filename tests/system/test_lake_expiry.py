"""Snapshot expiry (docs/contract.md, "Lake maintenance"), and reads across a compaction and an expiry: cursors resume
exactly, timestamp lookups answer as the full log does, consistent cuts keep answering with
snapshots that still read, and no file any kept snapshot needs is deleted.

Real parts: a server on loopback with a remote tier, the tiering job and the compaction on the
shared local SparkSession, a SQLite catalog and a local warehouse.
"""

from __future__ import annotations

import bisect
import time
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

import lakelog
from lakelog.lake.snapshot_summary import barrier_snapshots
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.lake_maintenance import LakeMaintenance
from lakelog.tiering.snapshot_retention import SnapshotEntry, snapshots_to_keep
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.harness.lake_compaction import BUCKETS, PATH, lake_rows
from tests.harness.lake_tier import LAKE_TABLE, expire_remote, lake_table
from tests.harness.tables import create_table, log_rows, order_rows, scan_all

RETENTION_S = 1
EXPIRING_TABLE = {
    **LAKE_TABLE,
    "table.datalake.target-file-size": "4mb",
    "table.datalake.snapshot-retention": f"{RETENTION_S}s",
    "table.log.ttl": "1h",
    "table.log.tiered.local-segments": "1",
}


def _warehouse_files(server: ServerProcess, path: lakelog.TablePath = PATH) -> set[str]:
    return {str(p) for p in (server.data_dir / "lake" / "warehouse" / path.database / path.table / "data").rglob("*.parquet")}


def _referenced_files(server: ServerProcess, path: lakelog.TablePath = PATH) -> set[str]:
    return {p.removeprefix("file://") for p in lake_table(server, path).inspect.all_data_files().column("file_path").to_pylist()}


def _past_retention() -> None:
    """Until what was replaced before now is older than the table's retention."""
    time.sleep(RETENTION_S + 0.2)


def test_what_an_expiry_keeps() -> None:
    snapshots = [SnapshotEntry(1, 1, 0), SnapshotEntry(2, 2, 1000), SnapshotEntry(3, 3, 5000), SnapshotEntry(4, 4, 9000)]
    # Retention 2 s at 10 s: 1 and 2 were replaced before 8 s, 3 only at 9 s; 4 is the newest.
    assert snapshots_to_keep(snapshots, 4, None, [], 2000, 10_000) == {3, 4}
    # The coordinator's snapshot and a cut's stay, however old.
    assert snapshots_to_keep(snapshots, 4, 1, [2], 2000, 10_000) == {1, 2, 3, 4}
    # An idle table: its only snapshot is old but was never replaced.
    assert snapshots_to_keep(snapshots[:1], 1, 1, [], 2000, 10_000) == {1}
    # A cut naming a snapshot the table no longer has changes nothing.
    assert snapshots_to_keep(snapshots, 4, None, [99], 2000, 10_000) == {3, 4}


def _produce(table: lakelog.Table, first: int, per_bucket: int) -> int:
    with table.new_append().create_writer() as writer:
        for start in range(first, first + per_bucket, 500):
            for bucket in range(BUCKETS):
                writer.append_arrow(order_rows(start * BUCKETS + bucket * 500, 500), bucket=bucket)
            writer.flush()
            time.sleep(0.002)  # distinct timestamps across batches
    return first + per_bucket


def test_cursors_lookups_and_cuts_across_a_compaction_and_an_expiry(spark: Any, server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory(**{"log.segment.max-bytes": "64kb", "remote.log.task-interval": "1h"})
    assert server.tablet is not None
    remote = server.tablet.remote
    with lakelog.connect(server.address, {"client.lake.enabled": "false"}) as plain:
        table = create_table(plain, buckets=BUCKETS, properties=EXPIRING_TABLE)
        produced = 0
        with TieringJob(TieringOptions(server.address, tables=(PATH,)), spark=spark) as job:
            for _ in range(4):
                produced = _produce(table, produced, 3000)
                remote.run_once()
                job.run_round()
        produced = _produce(table, produced, 2000)  # never tiered
        remote.run_once()
        truth = log_rows(server.address, PATH)
        assert expire_remote(remote, days=2).expired > 0  # the oldest offsets are in the lake alone now
        buckets = plain.admin.describe_buckets(PATH)
    lake_only = {b: min(o for o in (i.remote_log_start_offset, i.local_log_start_offset) if o >= 0) for b, i in buckets.items()}
    assert all(0 < end <= buckets[b].lake_log_end_offset for b, end in lake_only.items())
    tiered_snapshots = {s.snapshot_id for s in lake_table(server, PATH).snapshots()}
    before = lake_rows(server)

    def rows(bucket: int, start: int, end: int) -> pa.Table:
        return truth.filter(pc.equal(truth.column("__bucket"), bucket)).slice(start, end - start)

    # Small polls: the consumer's checkpoint lands early in the lake-only range.
    with lakelog.connect(server.address, {"client.lake.source": "iceberg-arrow", "client.scanner.max-poll-records": 250}) as conn:
        # A consumer reads part of the lake, checkpoints, and stays subscribed across the compaction.
        scanner = conn.get_table(PATH).new_scan().create_log_scanner()
        scanner.subscribe_from_beginning()
        first_part = scan_all(scanner, 500)
        checkpoint = scanner.positions()
        assert all(offset < lake_only[b] for b, offset in checkpoint.items()), "the checkpoint lies in the lake-only range"

        with LakeMaintenance(server.address, spark=spark) as jobs:
            compacted = jobs.compactor().compact(PATH)
            assert compacted.files_replaced == 4 * BUCKETS
            rest = scan_all(scanner, truth.num_rows - first_part.num_rows)
            scanner.close()
            got = pa.concat_tables([first_part, rest])
            for bucket in range(BUCKETS):
                mine = got.filter(pc.equal(got.column("__bucket"), bucket))
                assert mine.column("__offset").to_pylist() == list(range(buckets[bucket].high_watermark)), "no gap, no duplicate"
                assert mine.column("id").equals(rows(bucket, 0, buckets[bucket].high_watermark).column("id"))

            # The tablet servers hand out the compacted snapshot now: the ones it replaced can go.
            latest = compacted.snapshot_id
            _past_retention()
            expired = jobs.expiry().expire(PATH)
        assert expired.snapshots_expired == len(tiered_snapshots), "every tiering snapshot was replaced by the compaction"
        assert expired.files_deleted >= 4 * BUCKETS
        assert {s.snapshot_id for s in lake_table(server, PATH).snapshots()} == {latest}
        assert _warehouse_files(server) == _referenced_files(server), "the small files are gone, nothing else"
        assert lake_rows(server).equals(before)

        # A new consumer resumes from the checkpoint, exactly.
        with conn.get_table(PATH).new_scan().create_log_scanner() as resumed:
            for bucket, offset in checkpoint.items():
                resumed.subscribe(bucket, offset)
            again = scan_all(resumed, sum(buckets[b].high_watermark - o for b, o in checkpoint.items()))
            assert resumed.records_by_tier().get("lake", 0) > 0
        for bucket, offset in checkpoint.items():
            mine = again.filter(pc.equal(again.column("__bucket"), bucket))
            assert mine.column("id").equals(rows(bucket, offset, buckets[bucket].high_watermark).column("id"))

        # Timestamp lookups the lake answers (lake-only offsets) match the full log.
        for bucket in range(BUCKETS):
            stamps = rows(bucket, 0, buckets[bucket].high_watermark).column("__timestamp").to_pylist()
            for probe in (stamps[0], stamps[lake_only[bucket] // 2], stamps[lake_only[bucket] - 1]):
                want = bisect.bisect_left(stamps, probe)
                assert conn.admin.list_offsets(PATH, [bucket], lakelog.OffsetSpec.timestamp(probe)) == {bucket: want}

        # The consistent cut answers the compacted snapshot, which reads the same rows.
        cut = conn.admin.get_consistent_lake_snapshots([PATH])
        assert cut == {PATH: latest}
        assert lake_rows(server, snapshot_id=cut[PATH]).equals(before)


def test_an_expiry_keeps_the_snapshot_a_consistent_cut_with_a_lagging_table_answers(
    spark: Any, server_factory: Callable[..., ServerProcess]
) -> None:
    server = server_factory()
    left, right = lakelog.TablePath("shop", "left"), lakelog.TablePath("shop", "right")
    with lakelog.connect(server.address) as conn:
        tables = [create_table(conn, path.table, buckets=1, properties=EXPIRING_TABLE) for path in (left, right)]
        written = 0

        def write(targets: list[lakelog.Table]) -> None:
            nonlocal written
            with conn.open_barrier_hold() as hold:
                for target in targets:
                    with target.new_append().create_writer(hold=hold) as writer:
                        writer.append_arrow(order_rows(written, 100))
            written += 100

        with TieringJob(TieringOptions(server.address, tables=(left, right)), spark=spark) as both:
            for _ in range(2):
                write(tables)
                both.run_round()
        shared = conn.admin.get_consistent_lake_snapshots([left, right])
        # Only the left table moves on: newer barriers the right one never gets.
        with TieringJob(TieringOptions(server.address, tables=(left,)), spark=spark) as alone:
            for _ in range(3):
                write(tables[:1])
                alone.run_round()
        assert conn.admin.get_consistent_lake_snapshots([left, right]) == shared
        assert len(lake_table(server, left).snapshots()) == 5
        cut_rows = lake_rows(server, left, shared[left])

        _past_retention()
        with LakeMaintenance(server.address) as jobs:
            report = jobs.expiry().expire(left)
        kept = {s.snapshot_id for s in lake_table(server, left).snapshots()}
        assert report.snapshots_expired == 3 and kept == {shared[left], lake_table(server, left).current_snapshot().snapshot_id}
        assert conn.admin.get_consistent_lake_snapshots([left, right]) == shared
        assert lake_rows(server, left, shared[left]).equals(cut_rows), "the cut still reads, its files were kept"
        assert barrier_snapshots(lake_table(server, left))
        assert _warehouse_files(server, left) == _referenced_files(server, left)


def test_an_expiry_with_nothing_to_expire_changes_nothing(spark: Any, server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, buckets=BUCKETS, properties={**EXPIRING_TABLE, "table.datalake.snapshot-retention": "1h"})
        with TieringJob(TieringOptions(server.address, tables=(PATH,)), spark=spark) as job:
            for index in range(2):
                _produce(table, index * 1000, 1000)
                job.run_round()
    metadata = lake_table(server, PATH).metadata_location
    with LakeMaintenance(server.address) as jobs:
        report = jobs.expiry().expire(PATH)
    assert (report.snapshots_expired, report.snapshots_kept, report.files_deleted, report.orphans_deleted) == (0, 2, 0, 0)
    assert lake_table(server, PATH).metadata_location == metadata, "no commit"
