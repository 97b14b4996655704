"""A lake table's numbers (:class:`~lakelog.log_source.LakeTableStats`) from its Iceberg metadata.

The coordinator reads them for its metrics and status page at every scrape; a table's numbers
change only with its metadata, so they are kept per metadata file and a scrape of an unchanged
table costs one catalog lookup, not a read of its manifests.
"""

from __future__ import annotations

import threading

from pyiceberg.table import Table

from lakelog.lake.iceberg_scan_planner import snapshot_data_files
from lakelog.lake.snapshot_summary import COMPACTION
from lakelog.lake.table_layout import SMALL_FILE_SHARE
from lakelog.log_source import LakeTableStats


def lake_table_stats(table: Table, target_file_size: int) -> LakeTableStats:
    current = table.current_snapshot()
    files = snapshot_data_files(table, current.snapshot_id) if current is not None else []
    compactions = [s.timestamp_ms for s in table.snapshots() if s.summary is not None and s.summary.get(COMPACTION) is not None]
    return LakeTableStats(
        data_files=len(files),
        small_files=sum(1 for f in files if f.file_size_in_bytes < target_file_size * SMALL_FILE_SHARE),
        snapshots=len(table.snapshots()),
        last_compaction_ms=max(compactions, default=None),
    )


class LakeTableStatsCache:
    """:func:`lake_table_stats` per table, computed again only when its metadata file changed."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, ...], tuple[str, int, LakeTableStats]] = {}
        self._lock = threading.Lock()

    def stats(self, table: Table, target_file_size: int) -> LakeTableStats:
        key = tuple(table.name())
        with self._lock:
            known = self._known.get(key)
        if known is not None and known[:2] == (table.metadata_location, target_file_size):
            return known[2]
        found = lake_table_stats(table, target_file_size)
        with self._lock:
            self._known[key] = (table.metadata_location, target_file_size, found)
        return found
