"""Compaction of a lake table: its small files bin-packed into files of
``table.datalake.target-file-size``, as Spark tasks, committed as one snapshot that swaps them.

A compaction:

1. loads the lake table and plans bins from its current snapshot (:mod:`.compaction_planner`);
2. rewrites each bin as one file in a Spark task (:mod:`.compaction_task`), rows in offset order;
3. checks each new file's statistics against its bin (records, first and last offset), then swaps
   the bins' files for the new ones in one snapshot whose summary carries the newest tiering
   commit's offsets and barrier unchanged (:func:`lakelog.lake.snapshot_summary.compaction_summary`);
4. tells the coordinator, so the tablet servers hand readers the compacted snapshot (its id is
   above theirs: of two snapshots with the same lake ranges they keep the larger id).

A tiering round and a compaction race like two tiering rounds: each commit asserts the snapshot it
was planned on, so one wins and the other's is refused. A refused tiering round plans again (see
:mod:`.tiering_job`); a refused compaction reloads the table and commits the files it already
wrote on top of the new snapshot, with that snapshot's offsets (a tiering round only adds files, so
the bins are still there), or deletes them when another compaction replaced the same files.

Test hook: ``LAKELOG_TIERING_KILL_AT=compact-after-write|compact-after-commit`` (see
:mod:`.kill_points`). Files a killed compaction wrote and never committed are removed like a dead
tiering round's (:mod:`.orphan_files`).
"""

from __future__ import annotations

import functools
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from pyiceberg.io.pyarrow import parquet_file_to_data_file, schema_to_pyarrow
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from lakelog.client.connection import Connection
from lakelog.errors import LakeDataError, LakeError
from lakelog.human_size import human_size
from lakelog.lake.iceberg_scan_planner import files_by_bucket, snapshot_data_files
from lakelog.lake.lake_catalog import LakeCatalog, lake_call
from lakelog.lake.snapshot_summary import BUCKET_OFFSETS, compaction_summary, decode_bucket_offsets, latest_lake_snapshot
from lakelog.metadata import LakeSnapshot, TablePath
from lakelog.progress import counted
from lakelog.server.coordinator.table_properties import TARGET_FILE_SIZE, table_property
from lakelog.tiering.compaction_planner import CompactionBin, plan_bins, worth_it
from lakelog.tiering.compaction_task import RESULT_DDL, CompactedFile, CompactionSettings, compact_bins
from lakelog.tiering.kill_points import COMPACT_AFTER_COMMIT, COMPACT_AFTER_WRITE, kill_point
from lakelog.tiering.lake_commit import discard_files, guard_commits, replace_files, tell_coordinator
from lakelog.tiering.round_progress import RoundProgress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# How often a compaction commits its files again after a tiering round committed first.
COMMIT_ATTEMPTS = 5
# New files' footers read at once by the driver (they become the snapshot's manifest entries).
FOOTER_READS = 8


@dataclass(frozen=True)
class CompactionReport:
    """What one compaction of ``path`` did; ``snapshot_id`` None: nothing to compact, or lost to
    another compaction of the same files."""

    path: TablePath
    snapshot_id: int | None
    files_replaced: int
    files_written: int
    records: int
    bytes_written: int
    seconds: float


class LakeCompactor:
    """Compacts lake tables with one SparkSession, through one connection and its lake catalog."""

    def __init__(
        self, conn: Connection, catalog: LakeCatalog, spark: "SparkSession", io_properties: Mapping[str, str], commit_user: str
    ) -> None:
        self._conn = conn
        self._catalog = catalog
        self._spark = spark
        self._io_properties = dict(io_properties)
        self.commit_user = commit_user

    def compact(self, path: TablePath, label: str = "lakelog lake compact", min_files: int = 2) -> CompactionReport:
        """Compact the bins of ``path`` that have ``min_files`` files or fill a file (see
        :func:`~.compaction_planner.worth_it`); ``label`` heads the progress lines."""
        began = time.monotonic()
        info = self._conn.admin.get_table_info(path)
        if not info.lake_enabled:
            raise LakeError(f"table {path} is not lake-enabled (table.datalake.enabled=true)")
        target_size = table_property(str(path), info.properties, TARGET_FILE_SIZE)
        table = self._catalog.load_table(path)
        guard_commits(table)
        snapshot = table.current_snapshot()
        if snapshot is None or latest_lake_snapshot(table) is None:
            return CompactionReport(path, None, 0, 0, 0, 0, time.monotonic() - began)
        data_files = snapshot_data_files(table, snapshot.snapshot_id)
        bins = [b for b in plan_bins(files_by_bucket(table, data_files), target_size) if worth_it(b, target_size, min_files)]
        if not bins:
            log.info("%s: nothing to compact (no %d neighbouring files below %s)", path, min_files, human_size(target_size))
            return CompactionReport(path, None, 0, 0, 0, 0, time.monotonic() - began)
        progress = RoundProgress(label, self._spark, verb="compact")
        progress.planned({path: (sum(b.record_count for b in bins), len(bins))})
        try:
            with progress.tasks():
                written = self._write(table, bins)
            kill_point(COMPACT_AFTER_WRITE)
            by_path = {file.file_path: file for file in data_files}
            replaced = [by_path[f.path] for b in bins for f in b.files]
            added = self._new_entries(table, bins, written)
            snapshot_id = self._commit(path, table, replaced, added)
        except BaseException:
            progress.finished(0)
            raise
        records = sum(b.record_count for b in bins)
        progress.finished(records)
        size = sum(w.file_size_bytes for w in written)
        report = CompactionReport(path, snapshot_id, len(replaced), len(added), records, size, time.monotonic() - began)
        if snapshot_id is not None:
            log.info(
                "%s: compacted %d files into %d (%s, %s) as snapshot %d",
                path, len(replaced), len(added), counted(records, "record"), human_size(size), snapshot_id,
            )
        return report

    def _write(self, table: Table, bins: Sequence[CompactionBin]) -> list[CompactedFile]:
        """One Spark task per bin; on failure delete whatever the tasks wrote."""
        settings = CompactionSettings(self._io_properties, schema_to_pyarrow(table.schema()))
        task = functools.partial(compact_bins, settings, tuple(bins))
        try:
            rows = self._spark.range(0, len(bins), 1, numPartitions=len(bins)).mapInArrow(task, RESULT_DDL).collect()
        except Exception as exc:  # noqa: BLE001 - Py4J, Spark Connect and task errors all end up here
            discard_files(table, [b.file_path for b in bins])
            raise LakeError(f"compaction tasks failed: {type(exc).__name__}: {str(exc)[:2000]}") from exc
        return sorted((CompactedFile(**row.asDict()) for row in rows), key=lambda w: w.bin)

    def _new_entries(self, table: Table, bins: Sequence[CompactionBin], written: Sequence[CompactedFile]) -> list[DataFile]:
        """The new files' manifest entries (from their footers), each checked against its bin: a file
        that does not hold exactly the bin's offsets never reaches the lake."""

        def entry(file: CompactedFile) -> DataFile:
            return parquet_file_to_data_file(table.io, table.metadata, file.file_path)

        with ThreadPoolExecutor(FOOTER_READS, thread_name_prefix="compaction-footer") as pool:
            entries = lake_call("cannot read the compacted files' footers", lambda: list(pool.map(entry, written)))
        for compaction, data in zip(bins, entries):
            [(_, planned)] = files_by_bucket(table, [data]).items()
            got = (planned[0].first_offset, planned[0].last_offset + 1, data.record_count)
            if got != (compaction.first_offset, compaction.end_offset, compaction.record_count):
                discard_files(table, [w.file_path for w in written])
                raise LakeDataError(
                    f"compacted file {data.file_path} holds offsets [{got[0]}, {got[1]}) in {got[2]} rows, its bin"
                    f" [{compaction.first_offset}, {compaction.end_offset}) in {compaction.record_count}"
                )
        return entries

    def _commit(self, path: TablePath, table: Table, replaced: Sequence[DataFile], added: Sequence[DataFile]) -> int | None:
        """Commit the swap, again on top of whatever committed first; then tell the coordinator."""
        for attempt in range(COMMIT_ATTEMPTS):
            summary = compaction_summary(table, self.commit_user, len(replaced), len(added))
            snapshot_id = replace_files(table, replaced, added, summary)
            if snapshot_id is not None:
                break
            table = self._catalog.load_table(path)
            current = table.current_snapshot()
            still_there = {f.file_path for f in snapshot_data_files(table, current.snapshot_id)} if current else set()
            if not all(f.file_path in still_there for f in replaced):
                log.info("%s: another compaction replaced these files first; dropping this one's", path)
                discard_files(table, [f.file_path for f in added])
                return None
            log.info("%s: the table moved while compacting (attempt %d); committing on top of snapshot %s", path, attempt + 1, current and current.snapshot_id)
        else:
            discard_files(table, [f.file_path for f in added])
            raise LakeError(f"{path}: the compaction lost the commit race {COMMIT_ATTEMPTS} times; its files are deleted")
        kill_point(COMPACT_AFTER_COMMIT)
        tell_coordinator(self._conn.internal_admin, path, LakeSnapshot(snapshot_id, decode_bucket_offsets(summary[BUCKET_OFFSETS])))
        return snapshot_id
