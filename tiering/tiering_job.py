"""The tiering job's driver: rounds that copy each lake-enabled table's new log records into its
Iceberg table, exactly once.

A round, per table (each partition of a partitioned table tiers like a table, its buckets keyed
``(partition_id, bucket)``, under the same barrier; all of a table's partitions commit as one
snapshot):

1. load the Iceberg table (the object the commit will go against) and its latest tiering snapshot:
   its summary ``lakelog.bucket-offsets`` says where each bucket's lake ends. The lake is the source
   of truth, so a restarted job resumes from there;
2. if the coordinator does not know that snapshot (a job died between the Iceberg commit and the
   RPC), send it before anything else;
3. ask the tablet servers for the high watermarks and plan splits ``[lake end, barrier offset)``,
   within ``max_records_per_round``. The round's barrier B is taken once, before any table is
   planned, from the servers leading the tables' buckets (GetServerTime: a time every one of them
   has passed, never the driver's clock); each bucket stops at its first record stamped after B, and
   the snapshot carries ``lakelog.barrier`` = B (see :func:`lakelog.log_ranges.barrier_ends`);
4. one Spark task per split reads its range through the client and writes a Parquet file;
5. commit all of the table's files as one snapshot against the table loaded in 1. If another job
   committed meanwhile the catalog refuses it: the files are deleted and the table is planned
   again from the new snapshot. Then send ``CommitLakeTableSnapshot``.

When the job first touches a table, and again each ``table.datalake.orphan-grace`` after, it
deletes the data files of rounds that never committed once older than that grace (see
:mod:`lakelog.tiering.orphan_files`): a job that runs for weeks also removes what another job,
killed while this one ran, left behind.

A table with ``table.datalake.auto-compaction=true`` is compacted, then its snapshots expired, after
a round that committed to it (:meth:`TieringJob._maintain`).

While a round runs, its progress goes to stderr (:mod:`lakelog.tiering.round_progress`); every
round moves the job's metrics (:mod:`lakelog.tiering.tiering_metrics`).

Test hook: ``LAKELOG_TIERING_KILL_AT=after-write|after-commit`` makes the job SIGKILL itself at
that point of a round (see :mod:`lakelog.tiering.kill_points`).
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar

from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.table import Table

from lakelog.client.connection import connect
from lakelog.config import Configuration
from lakelog.errors import LakeError, LakelogError, LakeSnapshotNotExistError, PartitionNotExistError
from lakelog.human_size import human_size
from lakelog.lake.lake_catalog import iceberg_catalog
from lakelog.lake.snapshot_summary import encode_bucket_key, latest_lake_snapshot
from lakelog.lake.table_layout import data_location, new_data_file_path
from lakelog.metadata import (
    LakeBucketKey,
    LakeSnapshot,
    OffsetSpec,
    PartitionInfo,
    TablePath,
    lake_bucket_key,
    lake_bucket_order,
    partition_spec,
    split_lake_bucket_key,
)
from lakelog.tiering.kill_points import AFTER_COMMIT, AFTER_WRITE, kill_point
from lakelog.server.coordinator.table_properties import AUTO_COMPACTION, ORPHAN_GRACE, table_property
from lakelog.tiering.lake_compaction import LakeCompactor
from lakelog.tiering.lake_enabled_tables import lake_enabled_tables
from lakelog.tiering.snapshot_expiry import SnapshotExpiry
from lakelog.tiering.lake_commit import commit_files, discard_files, guard_commits, next_offsets, tell_coordinator
from lakelog.tiering.orphan_files import remove_orphan_files
from lakelog.tiering.round_progress import RoundProgress
from lakelog.tiering.tiering_metrics import TieringMetrics
from lakelog.spark_runtime.spark_session import refuse_local_lake, spark_session
from lakelog.log_ranges import barrier_ends, bucket_ranges, split_range
from lakelog.tiering.tiering_split import TieringSplit
from lakelog.tiering.split_writer import RESULT_DDL, WriterSettings, WrittenFile, write_splits

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# How often a round plans a table again after losing the commit race to another job.
COMMIT_ATTEMPTS = 5
# With table.datalake.auto-compaction, a round that committed to a table compacts the bins that have
# this many neighbouring small files (or fill a file): a compaction every few rounds per bucket,
# not one per round, whose rewrite would cost more than the files it saves.
AUTO_COMPACTION_MIN_FILES = 8

Result = TypeVar("Result")


@dataclass(frozen=True)
class TieringOptions:
    """``client_config``: client keys (``lakelog config``) plus ``datalake.iceberg.*`` properties
    that add to what the coordinator hands out (the job's own credentials; ``AWS_*`` environment
    variables count too, the flags win)."""

    bootstrap: str
    tables: tuple[TablePath, ...] = ()
    interval_ms: int = 10_000
    max_records_per_round: int | None = None
    spark_master: str | None = None
    spark_log_level: str = "ERROR"  # of a classic session the job starts (a Connect server has its own)
    client_config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TableRound:
    """What one round did to one table; ``snapshot_id`` is None when there was nothing to tier."""

    path: TablePath
    snapshot_id: int | None
    records: int
    bytes: int
    files: int
    lake: LakeSnapshot | None


@dataclass(frozen=True)
class RoundReport:
    """What a round did per table, and the tables it could not tier (the next round retries them)."""

    tables: list[TableRound]
    failed: dict[TablePath, LakelogError] = field(default_factory=dict)
    barrier: int = -1  # of the round's last planning (a lost commit race plans again, at a new one)

    @property
    def records(self) -> int:
        return sum(t.records for t in self.tables)

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tables)


@dataclass(frozen=True)
class _Plan:
    path: TablePath
    table: Table
    lake: LakeSnapshot | None
    splits: list[TieringSplit]
    barrier: int | None  # None: the record budget stopped some bucket short of the barrier


class TieringJob:
    """Create with the options (and a SparkSession to share one), then :meth:`run_round` or :meth:`run`."""

    def __init__(self, options: TieringOptions, spark: "SparkSession | None" = None) -> None:
        self.options = options
        self.commit_user = f"lakelog-tier-{uuid.uuid4().hex[:12]}"
        # The lake switched off: the job plans from the lake's own summary and its tasks must never
        # read back what was already tiered, so offsets and records come from local and remote only.
        self._client_config = {**Configuration(options.client_config).items(), "client.lake.enabled": False}
        self._conn = connect(options.bootstrap, self._client_config)
        # The coordinator's lake config with the job's own credentials on top, as any client layers it.
        self.lake_config = self._conn.lake_config()
        self._catalog = iceberg_catalog(self._conn.lake_catalog())
        for path in options.tables:  # before Spark starts: a typo fails in a second, not ten
            if not self._conn.admin.get_table_info(path).lake_enabled:
                raise LakeError(f"table {path} is not lake-enabled (table.datalake.enabled=true)")
        self._owns_spark = spark is None
        # --spark-master, else the job's own lake.spark.master, else the Spark the cluster advertises.
        master = options.spark_master or self.lake_config.spark_master_for(self._conn.config) or None
        self._spark = spark if spark is not None else spark_session(master, log_level=options.spark_log_level)
        refuse_local_lake(self._spark, self.lake_config)
        self._swept: dict[TablePath, float] = {}  # when each table's orphan files were last removed (monotonic s)
        self._compactor = LakeCompactor(self._conn, self._catalog, self._spark, self.lake_config.catalog_properties, self.commit_user)
        self.metrics = TieringMetrics()
        self._rounds = 0
        self._total_records = 0
        self._total_bytes = 0

    # the loop

    def run(self, once: bool = False, stop: threading.Event | None = None) -> None:
        """Rounds every ``interval_ms`` until ``stop`` is set (one round with ``once``, whose failure raises)."""
        stop = stop or threading.Event()
        while True:
            began = time.monotonic()
            try:
                failed = self.run_round().failed
                if failed and once:
                    raise next(iter(failed.values()))
            except LakelogError as error:
                if once:
                    raise
                log.warning("tiering round failed, the next one retries: %s", error)
            if once or stop.wait(max(0.0, self.options.interval_ms / 1000 - (time.monotonic() - began))):
                return

    def run_round(self) -> RoundReport:
        """One round over every table. A table that fails (its catalog entry gone, a refused RPC)
        is reported in ``failed`` without holding the others back; a failed Spark job fails the round."""
        self._rounds += 1
        began = time.monotonic()
        progress = RoundProgress(f"lakelog tier (round {self._rounds})", self._spark)
        try:
            report = self._round(progress)
        except BaseException:
            self.metrics.round_finished(time.monotonic() - began, ok=False)
            progress.finished(0)
            raise
        self.metrics.round_finished(time.monotonic() - began, ok=True)
        for path in report.failed:
            self.metrics.table_failed(path)
        progress.finished(report.records)
        self._report(report)
        self._maintain(report)
        return report

    def _maintain(self, report: RoundReport) -> None:
        """Compact, then expire, each table the round committed to whose
        ``table.datalake.auto-compaction`` is on. Its failure is logged: the tiering is done, and the
        next round that commits to the table tries again."""
        for result in report.tables:
            if result.snapshot_id is None:
                continue
            try:
                info = self._conn.admin.get_table_info(result.path)
                if not table_property(str(result.path), info.properties, AUTO_COMPACTION):
                    continue
                self._compactor.compact(result.path, f"lakelog tier (round {self._rounds}): compaction", AUTO_COMPACTION_MIN_FILES)
                SnapshotExpiry(self._conn.admin, self._catalog).expire(result.path)
            except LakelogError as error:
                log.warning("%s: automatic compaction or expiry failed (the next round tries again): %s", result.path, error)

    def _round(self, progress: RoundProgress) -> RoundReport:
        done: list[TableRound] = []
        failed: dict[TablePath, LakelogError] = {}
        pending = tables = self._tables()
        barrier = -1
        for attempt in range(COMMIT_ATTEMPTS):
            # Taken again after a lost commit race: the winner's barrier is newer than ours was.
            barrier = self._conn.internal_admin.barrier_safe_time(pending) if pending else -1
            plans = [plan for path in pending if (plan := self._for_table(path, failed, lambda: self._plan(path, barrier)))]
            if attempt == 0:
                progress.planned({p.path: (sum(s.end_offset - s.start_offset for s in p.splits), len(p.splits)) for p in plans if p.splits})
            with progress.tasks():
                written = self._write(plans)
            if written:
                kill_point(AFTER_WRITE)
            pending = []
            for plan in plans:
                files = [w for w in written if w.table == str(plan.path)]
                result = self._for_table(plan.path, failed, lambda: self._commit(plan, files, bool(written)))
                if result is None and plan.path not in failed:
                    pending.append(plan.path)
                elif result is not None:
                    done.append(result)
                    self.metrics.table_tiered(result.path, result.records, result.bytes, result.lake, result.snapshot_id is not None)
            if not pending:
                break
        for path in pending:
            failed[path] = LakeError(f"{path}: lost the commit race {COMMIT_ATTEMPTS} times; the next round tries again")
        self._heartbeat(tables, barrier)
        return RoundReport(done, failed, barrier)

    def close(self) -> None:
        self._conn.close()
        if self._owns_spark:
            self._spark.stop()

    def __enter__(self) -> "TieringJob":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # one round

    @staticmethod
    def _for_table(path: TablePath, failed: dict[TablePath, LakelogError], step: Callable[[], Result]) -> Result | None:
        """Run one table's step; its failure is recorded and logged, and the other tables go on."""
        try:
            return step()
        except LakelogError as error:
            log.warning("%s: not tiered this round: %s", path, error)
            failed[path] = error
            return None

    def _tables(self) -> list[TablePath]:
        """The tables named in the options, else every lake-enabled table (new ones join the next round)."""
        if self.options.tables:
            return list(self.options.tables)
        return lake_enabled_tables(self._conn.admin)

    def _plan(self, path: TablePath, barrier: int) -> _Plan:
        table = self._catalog.load_table(path)
        guard_commits(table)
        info = self._conn.admin.get_table_info(path)
        grace_ms = table_property(str(path), info.properties, ORPHAN_GRACE)
        if time.monotonic() - self._swept.get(path, float("-inf")) >= grace_ms / 1000:
            # A file younger than the grace may be another job's round or compaction about to commit.
            remove_orphan_files(table, datetime.now(timezone.utc) - timedelta(milliseconds=grace_ms))
            self._swept[path] = time.monotonic()
        lake = latest_lake_snapshot(table)
        if lake is not None:
            self._catch_up_coordinator(path, lake)
        # The table's own log (None), or each partition's; a lake-only partition has no log left:
        # the lake already holds all of it.
        logs: list[PartitionInfo | None] = (
            [p for p in self._conn.admin.list_partition_infos(path) if not p.lake_only] if info.partitioned else [None]
        )
        lake_ends = {key: o.log_end_offset for key, o in (lake.bucket_offsets if lake else {}).items()}
        starts: dict[LakeBucketKey, int] = {}
        ends: dict[LakeBucketKey, int] = {}
        for partition in logs:
            try:
                log_starts, log_ends = self._log_range(path, partition, barrier, lake_ends)
            except PartitionNotExistError:
                if partition is None:
                    raise
                log.info("%s: partition %s was dropped while the round was planned", path, partition.partition_name)
                continue
            starts.update(log_starts)
            ends.update(log_ends)
        root = data_location(table)
        names = {p.partition_id: p.partition_name for p in logs if p is not None}
        ranges = bucket_ranges(starts, ends, self.options.max_records_per_round)
        splits = []
        for key, (start, end) in ranges.ranges.items():
            partition_id, bucket = split_lake_bucket_key(key)
            name = names.get(partition_id, "") if partition_id is not None else ""
            values = partition_spec(info.partition_keys, name) if partition_id is not None else None
            splits += [
                TieringSplit(path, bucket, s, e, new_data_file_path(root, bucket, s, e, values), partition_id, name)
                for s, e in split_range(start, end)
            ]
        return _Plan(path, table, lake, splits, barrier if ranges.complete else None)

    def _log_range(
        self, path: TablePath, partition: PartitionInfo | None, barrier: int, lake_ends: Mapping[LakeBucketKey, int]
    ) -> tuple[dict[LakeBucketKey, int], dict[LakeBucketKey, int]]:
        """Per bucket of the table (or of its ``partition``), where this round starts (the lake's
        end, else the log's earliest offset) and ends (the barrier offset)."""
        admin = self._conn.admin
        partition_name = partition.partition_name if partition else None
        key = functools.partial(lake_bucket_key, partition.partition_id if partition else None)
        high_watermarks = admin.list_offsets(path, spec=OffsetSpec.latest(), partition_name=partition_name)
        after = admin.list_offsets(path, spec=OffsetSpec.timestamp(barrier + 1), partition_name=partition_name)
        ends = {key(b): end for b, end in barrier_ends(high_watermarks, after).items()}
        starts = {k: lake_ends[k] for k in ends if k in lake_ends}
        untiered = [b for b in high_watermarks if key(b) not in starts]
        if untiered:
            starts.update({key(b): o for b, o in admin.list_offsets(path, untiered, OffsetSpec.earliest(), partition_name).items()})
        return starts, ends

    def _catch_up_coordinator(self, path: TablePath, lake: LakeSnapshot) -> None:
        """Send the lake's latest snapshot if the coordinator does not have it (a lost RPC)."""
        try:
            known = self._conn.admin.get_lake_snapshot(path).snapshot_id
        except LakeSnapshotNotExistError:
            known = None
        if known != lake.snapshot_id:
            log.info("%s: the coordinator has lake snapshot %s, the lake %d; sending it", path, known, lake.snapshot_id)
            self._tell_coordinator(path, lake)

    def _write(self, plans: Sequence[_Plan]) -> list[WrittenFile]:
        """Run one Spark task per split of every plan; on failure delete whatever the tasks wrote."""
        splits = [split for plan in plans for split in plan.splits]
        if not splits:
            return []
        settings = WriterSettings(
            bootstrap=self.options.bootstrap,
            client_config=self._client_config,
            io_properties=dict(self.lake_config.catalog_properties),
            lake_schemas={str(plan.path): schema_to_pyarrow(plan.table.schema()) for plan in plans if plan.splits},
        )
        task = functools.partial(write_splits, settings, tuple(splits))
        try:
            rows = self._spark.range(0, len(splits), 1, numPartitions=len(splits)).mapInArrow(task, RESULT_DDL).collect()
        except Exception as exc:  # noqa: BLE001 - Py4J, Spark Connect and task errors all end up here
            for plan in plans:
                discard_files(plan.table, [split.file_path for split in plan.splits])
            raise LakeError(f"tiering tasks failed: {type(exc).__name__}: {str(exc)[:2000]}") from exc
        return [WrittenFile(**row.asDict()) for row in rows]

    def _commit(self, plan: _Plan, files: list[WrittenFile], round_moved: bool) -> TableRound | None:
        """Commit the table's files; None when another job committed first (files deleted, plan again).

        A table with nothing new while others of the round moved commits a snapshot without files
        at the round's barrier, so an idle table never holds the consistent cut of busy ones back
        (a round where nothing moved commits nothing: the last common barrier still stands).
        """
        if not files and not (round_moved and plan.lake is not None and plan.barrier is not None):
            log.info("%s: nothing new to tier; lake %s", plan.path, _describe(plan.lake))
            return TableRound(plan.path, None, 0, 0, 0, plan.lake)
        offsets = next_offsets(plan.lake, files)
        snapshot_id = commit_files(plan.table, files, offsets, self.commit_user, plan.barrier)
        if snapshot_id is None:
            log.info("%s: another job committed since this round was planned; planning it again", plan.path)
            return None
        kill_point(AFTER_COMMIT)
        lake = LakeSnapshot(snapshot_id, offsets)
        self._tell_coordinator(plan.path, lake)
        records, size = sum(f.record_count for f in files), sum(f.file_size_bytes for f in files)
        log.info(
            "%s: tiered %d records (%s) in %d file(s) as snapshot %d; lake %s",
            plan.path, records, human_size(size), len(files), snapshot_id, _describe(lake),
        )
        return TableRound(plan.path, snapshot_id, records, size, len(files), lake)

    def _tell_coordinator(self, path: TablePath, lake: LakeSnapshot) -> None:
        tell_coordinator(self._conn.internal_admin, path, lake)

    def _heartbeat(self, tables: list[TablePath], barrier: int) -> None:
        """Best effort, like :meth:`_tell_coordinator`: status is for people, tiering goes on without it."""
        try:
            self._conn.internal_admin.tiering_heartbeat(self.commit_user, tables, barrier)
        except LakelogError as error:
            log.warning("could not report this job to the coordinator: %s", error)

    def _report(self, report: RoundReport) -> None:
        self._total_records += report.records
        self._total_bytes += report.bytes
        print(
            f"lakelog tier: round {self._rounds}: {report.records} records, {human_size(report.bytes)} tiered"
            f" ({len(report.tables)} table(s)); total {self._total_records} records, {human_size(self._total_bytes)}",
            file=sys.stderr,
            flush=True,
        )


def _describe(lake: LakeSnapshot | None) -> str:
    if lake is None:
        return "empty"
    ranges = ", ".join(
        f"{encode_bucket_key(b)}:[{o.log_start_offset},{o.log_end_offset})"
        for b, o in sorted(lake.bucket_offsets.items(), key=lambda item: lake_bucket_order(item[0]))
    )
    return f"snapshot {lake.snapshot_id} buckets {ranges}"
