"""Committing a round's data files to a lake table as one Iceberg snapshot, and a compaction's
replacement of files by others.

The commit goes against the table object loaded when the round was planned: PyIceberg's append
asserts that the branch still points at the snapshot that object saw, so if any other job
committed in between, the catalog refuses this commit and nothing is tiered twice, provided
PyIceberg does not retry it on top of the other job's snapshot: :func:`guard_commits`.
"""

from __future__ import annotations

import logging
from typing import Iterable, Mapping, Sequence

from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from lakelog.client.internal_admin import InternalAdmin
from lakelog.errors import LakeDataError, LakeError, LakelogError, StaleLakeSnapshotError
from lakelog.lake.lake_catalog import lake_call
from lakelog.lake.snapshot_summary import summary_properties
from lakelog.lake.table_layout import COMMIT_RETRIES
from lakelog.metadata import LakeBucketKey, LakeBucketOffset, LakeSnapshot, TablePath, lake_bucket_order
from lakelog.tiering.split_writer import WrittenFile

log = logging.getLogger(__name__)


def guard_commits(table: Table) -> None:
    """Switch PyIceberg's commit retries off: lake tables are created so, this restores it on a
    table whose properties were changed since (a metadata-only commit, once)."""
    if table.properties.get(COMMIT_RETRIES) != "0":
        log.warning("%s: setting %s=0, which exactly-once tiering needs", table.name(), COMMIT_RETRIES)

        def set_no_retries() -> None:
            with table.transaction() as transaction:
                transaction.set_properties({COMMIT_RETRIES: "0"})

        lake_call(f"cannot set {COMMIT_RETRIES}=0 on {table.name()}", set_no_retries)


def next_offsets(previous: LakeSnapshot | None, files: Iterable[WrittenFile]) -> dict[LakeBucketKey, LakeBucketOffset]:
    """Every bucket's lake range once ``files`` are committed: buckets without a new file keep their
    range, so the newest snapshot always describes every bucket tiered so far (partitions the log
    dropped included: the lake still holds them)."""
    offsets = dict(previous.bucket_offsets) if previous else {}
    for file in sorted(files, key=lambda f: (lake_bucket_order(f.key), f.start_offset)):
        known = offsets.get(file.key)
        if known is not None and known.log_end_offset != file.start_offset:
            raise LakeDataError(
                f"bucket {file.key}: a file starting at offset {file.start_offset} does not continue the lake,"
                f" which ends at {known.log_end_offset}"
            )
        offsets[file.key] = LakeBucketOffset(
            known.log_start_offset if known else file.start_offset,
            file.end_offset,
            max(known.log_max_timestamp if known else -1, file.max_timestamp),
        )
    return offsets


def commit_files(
    table: Table,
    files: Sequence[WrittenFile],
    offsets: dict[LakeBucketKey, LakeBucketOffset],
    commit_user: str,
    barrier: int | None = None,
) -> int | None:
    """Commit ``files`` as one snapshot whose summary carries ``offsets`` and return its id.

    None when the table moved since ``table`` was loaded. Whenever the commit certainly did not
    land, the files are deleted; when its outcome is unknown they are kept (they may be in the lake).
    """
    paths = [file.file_path for file in files]
    transaction = table.transaction()
    try:
        transaction.add_files(
            paths,
            snapshot_properties=summary_properties(commit_user, offsets, barrier),
            check_duplicate_files=False,  # every name is fresh; checking would read every manifest
        )
    except (OSError, ValueError) as exc:
        discard_files(table, paths)
        raise LakeError(f"cannot add the round's data files to {table.name()}: {exc}") from exc
    try:
        committed = transaction.commit_transaction()
    except CommitFailedException:
        discard_files(table, paths)
        return None
    except Exception as exc:  # noqa: BLE001 - the outcome is unknown: keep the files, the lake decides next round
        raise LakeError(f"committing to {table.name()} failed, outcome unknown: {type(exc).__name__}: {exc}") from exc
    snapshot = committed.current_snapshot()
    if snapshot is None:
        raise LakeError(f"{table.name()}: the commit reported success but the table has no snapshot")
    return snapshot.snapshot_id


def replace_files(table: Table, replaced: Sequence[DataFile], added: Sequence[DataFile], properties: Mapping[str, str]) -> int | None:
    """Swap ``replaced`` for ``added`` in one snapshot (an Iceberg overwrite whose rows are the
    same: PyIceberg has no rewrite operation) whose summary is ``properties``; its id.

    None when the table moved since ``table`` was loaded (the caller reloads and tries again), or
    when one of ``replaced`` is no longer in it (PyIceberg refuses deleting a file that is not).
    Unlike :func:`commit_files` it leaves ``added`` where they are: the caller decides.
    """
    transaction = table.transaction()
    try:
        with transaction.update_snapshot(snapshot_properties=dict(properties)).overwrite() as overwrite:
            for file in replaced:
                overwrite.delete_data_file(file)
            for file in added:
                overwrite.append_data_file(file)
        committed = transaction.commit_transaction()
    except (CommitFailedException, ValidationException):
        return None
    except Exception as exc:  # noqa: BLE001 - the outcome is unknown: keep the files, the next run decides
        raise LakeError(f"committing a compaction to {table.name()} failed, outcome unknown: {type(exc).__name__}: {exc}") from exc
    snapshot = committed.current_snapshot()
    if snapshot is None:
        raise LakeError(f"{table.name()}: the compaction commit reported success but the table has no snapshot")
    return snapshot.snapshot_id


def tell_coordinator(admin: InternalAdmin, path: TablePath, lake: LakeSnapshot) -> None:
    """Best effort: a snapshot the coordinator misses is sent again by the next tiering round's catch-up."""
    try:
        admin.commit_lake_snapshot(path, lake)
    except StaleLakeSnapshotError as error:
        log.info("%s: the coordinator already has a newer lake snapshot: %s", path, error)
    except LakelogError as error:
        log.warning("%s: could not tell the coordinator about lake snapshot %d (sent again next round): %s", path, lake.snapshot_id, error)


def discard_files(table: Table, paths: Iterable[str]) -> None:
    """Delete data files no snapshot references (a failed round's, a lost race's)."""
    for path in paths:
        try:
            table.io.delete(path)
        except FileNotFoundError:
            pass  # its task never wrote it
        except OSError as exc:
            log.warning("could not delete %s (left for the orphan cleanup of the next job): %s", path, exc)
