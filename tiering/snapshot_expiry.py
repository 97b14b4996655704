"""Expiring a lake table's snapshots past ``table.datalake.snapshot-retention`` and removing the
files only they referenced.

An expiry:

1. decides which snapshots stay (:mod:`.snapshot_retention`: the current one, the coordinator's,
   those the tablet servers may hand out (:func:`~lakelog.lake.snapshot_summary.served_snapshot_ids`), those replaced within
   retention, those consistent cuts answer now);
2. works out the files only the others reference: data files, manifests and manifest lists that no
   snapshot it keeps references (a manifest's entries never change, so each is read once);
3. removes those snapshots from the table's metadata in one commit (PyIceberg's expire), again on a
   reloaded table if another commit landed first;
4. deletes the files of 2, then the data files no snapshot references and older than
   ``table.datalake.orphan-grace`` (:mod:`.orphan_files`): dead rounds' and compactions', and what
   an expiry killed between 3 and 4 left behind.

It never loses a tiering round's or a compaction's commit: the expiry changes no branch and each
of their commits asserts the snapshot it was planned on, which an expiry never removes (it is the
current one). Files a concurrent commit adds are new, and a compaction only references files the
current snapshot holds: none of them is among the files of 2.

Test hook: ``LAKELOG_TIERING_KILL_AT=expire-after-commit`` (see :mod:`.kill_points`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from lakelog.client.admin import Admin
from lakelog.errors import LakeError, LakelogError, LakeSnapshotNotExistError
from lakelog.lake.lake_catalog import LakeCatalog, lake_call
from lakelog.lake.snapshot_summary import barrier_snapshots, served_snapshot_ids
from lakelog.metadata import TablePath
from lakelog.server.coordinator.table_properties import ORPHAN_GRACE, SNAPSHOT_RETENTION, table_property
from lakelog.tiering.kill_points import EXPIRE_AFTER_COMMIT, kill_point
from lakelog.tiering.lake_commit import discard_files
from lakelog.tiering.lake_enabled_tables import lake_enabled_tables
from lakelog.tiering.orphan_files import remove_orphan_files
from lakelog.tiering.snapshot_retention import SnapshotEntry, snapshots_to_keep

log = logging.getLogger(__name__)

# How often an expiry decides again after another commit changed the table's metadata first.
COMMIT_ATTEMPTS = 5


@dataclass(frozen=True)
class ExpiryReport:
    """What one expiry of ``path`` did."""

    path: TablePath
    snapshots_expired: int
    snapshots_kept: int
    files_deleted: int  # data files, manifests and manifest lists only expired snapshots referenced
    orphans_deleted: int  # data files of dead rounds and compactions


class SnapshotExpiry:
    """Expires lake tables' snapshots through one connection's admin and lake catalog."""

    def __init__(self, admin: Admin, catalog: LakeCatalog) -> None:
        self._admin = admin
        self._catalog = catalog

    def expire(self, path: TablePath) -> ExpiryReport:
        info = self._admin.get_table_info(path)
        if not info.lake_enabled:
            raise LakeError(f"table {path} is not lake-enabled (table.datalake.enabled=true)")
        retention_ms = table_property(str(path), info.properties, SNAPSHOT_RETENTION)
        now_ms = int(time.time() * 1000)
        for attempt in range(COMMIT_ATTEMPTS):
            table = self._catalog.load_table(path)
            current = table.current_snapshot()
            keep = snapshots_to_keep(
                [SnapshotEntry(s.snapshot_id, s.sequence_number or 0, s.timestamp_ms) for s in table.snapshots()],
                current.snapshot_id if current else None,
                self._coordinator_snapshot(path),
                self._cuts(path, table) | served_snapshot_ids(table),
                retention_ms,
                now_ms,
            )
            expired = [s for s in table.snapshots() if s.snapshot_id not in keep]
            if not expired:
                deleted = 0
                break
            doomed = lake_call(
                f"cannot read the manifests of {path}'s lake table",
                lambda: _only_referenced_by(table, expired, [s for s in table.snapshots() if s.snapshot_id in keep]),
            )
            if not lake_call(f"cannot expire snapshots of {path}'s lake table", lambda: _commit_expiry(table, expired)):
                log.info("%s: the lake table moved while expiring (attempt %d); deciding again", path, attempt + 1)
                continue
            kill_point(EXPIRE_AFTER_COMMIT)
            discard_files(table, doomed)
            deleted = len(doomed)
            log.info("%s: expired %d lake snapshot(s), kept %d, deleted %d file(s)", path, len(expired), len(keep), deleted)
            break
        else:
            raise LakeError(f"{path}: the expiry lost the commit race {COMMIT_ATTEMPTS} times; the next one tries again")
        grace_ms = table_property(str(path), info.properties, ORPHAN_GRACE)
        orphans = remove_orphan_files(table, datetime.fromtimestamp((now_ms - grace_ms) / 1000, timezone.utc))
        return ExpiryReport(path, len(expired), len(keep), deleted, len(orphans))

    def _coordinator_snapshot(self, path: TablePath) -> int | None:
        try:
            return self._admin.get_lake_snapshot(path).snapshot_id
        except LakeSnapshotNotExistError:
            return None

    def _cuts(self, path: TablePath, table: Table) -> set[int]:
        """The table's snapshots that consistent cuts answer now: alone, and with each other lake table."""
        mine = barrier_snapshots(table)
        if not mine:
            return set()
        cuts = {mine[max(mine)]}
        for other in lake_enabled_tables(self._admin):
            if other == path:
                continue
            try:
                theirs = barrier_snapshots(self._catalog.load_table(other))
            except LakelogError as error:
                # Its cuts with this table are kept by retention alone; say so, and go on.
                log.warning("%s: cannot read the barriers of %s, its consistent cuts are not held: %s", path, other, error)
                continue
            common = set(mine) & set(theirs)
            if common:
                cuts.add(mine[max(common)])
        return cuts


def _commit_expiry(table: Table, expired: Iterable[Snapshot]) -> bool:
    """False when another commit changed the table's metadata first."""
    try:
        table.maintenance.expire_snapshots().by_ids([s.snapshot_id for s in expired]).commit()
    except CommitFailedException:
        return False
    return True


def _only_referenced_by(table: Table, expired: Iterable[Snapshot], kept: Iterable[Snapshot]) -> list[str]:
    """Files (data files, manifests, manifest lists) the ``expired`` snapshots reference and the
    ``kept`` ones do not."""
    live: dict[str, set[str]] = {}

    def files(snapshot: Snapshot) -> set[str]:
        found = {snapshot.manifest_list}
        for manifest in snapshot.manifests(table.io):
            found.add(manifest.manifest_path)
            if manifest.manifest_path not in live:
                live[manifest.manifest_path] = {
                    entry.data_file.file_path for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
                }
            found |= live[manifest.manifest_path]
        return found

    referenced = set().union(*(files(s) for s in kept))
    return sorted(set().union(*(files(s) for s in expired)) - referenced)
