"""Consumer groups' committed offsets, durable in their own SQLite file next to the coordinator's
metadata: a commit is synced before it is acknowledged, so it survives a coordinator restart."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Mapping

from lakelog.consumer_groups import GroupBucket

_SCHEMA = """
CREATE TABLE IF NOT EXISTS group_offsets (
    group_id TEXT NOT NULL,
    table_id INTEGER NOT NULL,
    partition_id INTEGER NOT NULL,
    bucket INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    committed_ms INTEGER NOT NULL,
    PRIMARY KEY (group_id, table_id, partition_id, bucket)
);
"""


class GroupOffsetStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)

    def commit(self, group_id: str, offsets: Mapping[GroupBucket, int]) -> None:
        """Store every offset of ``offsets`` in one transaction."""
        now = time.time_ns() // 1_000_000
        rows = [(group_id, b.table_id, b.partition_id, b.bucket, offset, now) for b, offset in offsets.items()]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR REPLACE INTO group_offsets VALUES (?, ?, ?, ?, ?, ?)", rows)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def offsets(self, group_id: str, table_id: int | None = None) -> dict[GroupBucket, int]:
        """The group's committed offsets (of one table, or of every table it read)."""
        query = "SELECT table_id, partition_id, bucket, next_offset FROM group_offsets WHERE group_id = ?"
        args: tuple[object, ...] = (group_id,)
        if table_id is not None:
            query += " AND table_id = ?"
            args += (table_id,)
        with self._lock:
            rows = self._db.execute(query, args).fetchall()
        return {GroupBucket(t, p, b): offset for t, p, b, offset in rows}

    def groups(self) -> list[str]:
        with self._lock:
            return [row[0] for row in self._db.execute("SELECT DISTINCT group_id FROM group_offsets ORDER BY group_id")]

    def close(self) -> None:
        with self._lock:
            self._db.close()
