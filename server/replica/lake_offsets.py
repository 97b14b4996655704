"""What the coordinator last told this tablet server is in the lake, per bucket.

The lake (not the coordinator) is the source of truth for what was tiered; the coordinator relays
each committed snapshot's offsets with NotifyLakeTableOffset, and a restarted tablet server learns
them back when it registers, before it serves a fetch.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Iterable

from lakelog.cluster_state import LakeOffsets


@dataclass(frozen=True)
class LakeBucketRange:
    """Offsets ``[start_offset, end_offset)`` of a bucket that lake snapshot ``snapshot_id`` holds;
    ``table_id`` is the bucket log's physical id (a partition's id for a partition's bucket)."""

    table_id: int
    bucket: int
    snapshot_id: int
    start_offset: int
    end_offset: int
    max_timestamp: int

    @property
    def empty(self) -> bool:
        return self.end_offset <= self.start_offset


class LakeRanges:
    def __init__(self) -> None:
        self._ranges: dict[tuple[int, int], LakeBucketRange] = {}
        self._lock = threading.Lock()

    def update(self, snapshots: Iterable[LakeOffsets]) -> None:
        """Apply notified lake snapshots; one ending a bucket before the held range never moves it
        backwards. Of two ending it at the same offset the later notification wins: the coordinator
        sends its newest snapshot, one commit at a time, and a compaction's snapshot ends every
        bucket where the snapshot it rewrote did."""
        ranges = [
            LakeBucketRange(t.physical_id, bucket, t.snapshot.snapshot_id, o.log_start_offset, o.log_end_offset, o.log_max_timestamp)
            for t in snapshots
            for bucket, o in t.snapshot.bucket_offsets.items()
        ]
        with self._lock:
            for new in ranges:
                key = (new.table_id, new.bucket)
                old = self._ranges.get(key)
                if old is None or new.end_offset >= old.end_offset:
                    self._ranges[key] = new

    def get(self, table_id: int, bucket: int) -> LakeBucketRange | None:
        with self._lock:
            found = self._ranges.get((table_id, bucket))
        return None if found is None or found.empty else found

    def end_offset(self, table_id: int, bucket: int) -> int | None:
        """The remote TTL hook: records below this are safe in the lake."""
        found = self.get(table_id, bucket)
        return found.end_offset if found else None

    def drop_table(self, table_id: int) -> None:
        with self._lock:
            for key in [key for key in self._ranges if key[0] == table_id]:
                del self._ranges[key]
