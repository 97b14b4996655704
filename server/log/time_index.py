"""Sparse time index of one segment: ``<base:020d>.timeindex``.

Each entry maps a batch's commit timestamp (int64 ms) to its base offset relative to the segment
(uint32), 12 bytes big-endian, written alongside the offset index entry of the same batch. Commit
timestamps never decrease in a bucket, so the entries are sorted by both fields and a lookup is one
bisect: it returns where a forward scan for "the first batch with timestamp >= T" may start.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from operator import itemgetter

from lakelog.server.log.index_file import IndexFile

_TIMESTAMP = itemgetter(0)
_OFFSET = itemgetter(1)


class TimeIndex(IndexFile):
    """Entries ``(timestamp, relative offset)``: timestamps non-decreasing, offsets increasing."""

    ENTRY = struct.Struct(">qI")

    @staticmethod
    def _ordered(previous: tuple[int, int], entry: tuple[int, int]) -> bool:
        return previous[0] <= entry[0] and previous[1] < entry[1]

    def append(self, timestamp: int, offset: int) -> None:
        self._append((timestamp, offset - self.base_offset))

    def lookup(self, timestamp: int) -> int:
        """Offset of the last indexed batch older than ``timestamp``, else the segment's base.

        Every batch before that one is older too, and the batch itself is, so the first batch with
        a timestamp >= ``timestamp`` lies after it: the scan starts there.
        """
        index = bisect_left(self.entries, timestamp, key=_TIMESTAMP) - 1
        return self.base_offset + (self.entries[index][1] if index >= 0 else 0)

    def last_entry(self) -> tuple[int, int] | None:
        """The last ``(timestamp, absolute offset)``."""
        if not self.entries:
            return None
        timestamp, relative = self.entries[-1]
        return timestamp, self.base_offset + relative

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of batches at or after ``offset``."""
        self._truncate(bisect_left(self.entries, offset - self.base_offset, key=_OFFSET))
