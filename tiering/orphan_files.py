"""Removing the data files of tiering rounds and compactions that never committed (a job killed
between writing and committing leaves them behind), and of an expiry killed before it deleted the
files of the snapshots it removed. A tiering job does this when it first touches a table and
every ``table.datalake.orphan-grace`` after, ``lakelog lake expire`` every time.

A file is removed only if no snapshot of the table references it and it is older than
``table.datalake.orphan-grace``. An unreferenced file is not
necessarily dead: another job's round or compaction may have written it and be about to commit it
(two jobs overlap when a restarted job starts before the old one is gone, or ``--once`` runs
overlap); the grace, far longer than a round takes from its first file to its commit, leaves those
alone, as Iceberg's own orphan removal keeps files younger than its ``older_than``. The listing is
taken before the references, so a file committed between the two counts as referenced.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import pyarrow.fs as pafs
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import Table

from lakelog.lake.lake_catalog import lake_call
from lakelog.lake.table_layout import DATA_FILE_SUFFIX, data_location

log = logging.getLogger(__name__)

# Object stores report modification times in whole seconds: a file written in the second the job
# started could look older than the job, so only files at least this much older are removed there.
OBJECT_STORE_CLOCK_SLACK = timedelta(seconds=1)


def _file_system(table: Table, location: str) -> tuple[pafs.FileSystem, str]:
    scheme, netloc, path = PyArrowFileIO.parse_location(location)
    io = table.io if isinstance(table.io, PyArrowFileIO) else PyArrowFileIO(table.io.properties)
    return io.fs_by_scheme(scheme, netloc), path


def remove_orphan_files(table: Table, older_than: datetime) -> list[str]:
    """Delete unreferenced Parquet files under the table's data location written before ``older_than``
    (aware UTC); returns their paths."""
    root = data_location(table)

    def remove() -> list[str]:
        fs, root_path = _file_system(table, root)
        slack = timedelta(0) if isinstance(fs, pafs.LocalFileSystem) else OBJECT_STORE_CLOCK_SLACK
        cutoff = older_than.astimezone(timezone.utc) - slack
        candidates = [
            info.path
            for info in fs.get_file_info(pafs.FileSelector(root_path, recursive=True, allow_not_found=True))
            if info.is_file and info.path.endswith(DATA_FILE_SUFFIX) and info.mtime is not None and info.mtime < cutoff
        ]
        if not candidates:
            return []
        table.refresh()
        files = table.inspect.all_data_files().column("file_path").to_pylist() if table.current_snapshot() else []
        referenced = {PyArrowFileIO.parse_location(path)[2] for path in files}
        found = [path for path in candidates if path not in referenced]
        for path in found:
            fs.delete_file(path)
        return found

    # pyarrow file systems and PyIceberg's manifest reads raise many types: all become a LakeError.
    orphans = lake_call(f"cannot clean up orphan data files under {root}", remove)
    if orphans:
        log.info("removed %d data file(s) no snapshot references under %s", len(orphans), root)
    return orphans
