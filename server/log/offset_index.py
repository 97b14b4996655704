"""Sparse offset index of one segment, as in Kafka: ``<base:020d>.index``.

Each entry maps the base offset of a batch (relative to the segment's base, uint32) to the byte
position of that batch in the ``.log`` file (uint32), 8 bytes big-endian. The segment adds an entry
for its first batch and then every ``log.index.interval-bytes`` bytes, so a lookup lands at most one
interval before the wanted batch and the rest is a short walk over batch headers.
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from operator import itemgetter

from lakelog.server.log.index_file import IndexFile

_OFFSET = itemgetter(0)


class OffsetIndex(IndexFile):
    """Entries ``(relative offset, position)``, both strictly increasing."""

    ENTRY = struct.Struct(">II")

    @staticmethod
    def _ordered(previous: tuple[int, int], entry: tuple[int, int]) -> bool:
        return previous[0] < entry[0] and previous[1] < entry[1]

    def append(self, offset: int, position: int) -> None:
        self._append((offset - self.base_offset, position))

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch starting at or before ``offset`` (0 if none)."""
        index = bisect_right(self.entries, offset - self.base_offset, key=_OFFSET) - 1
        return self.entries[index][1] if index >= 0 else 0

    def last_entry(self) -> tuple[int, int] | None:
        """The last ``(absolute offset, position)``, where a tail scan of the segment starts."""
        if not self.entries:
            return None
        relative, position = self.entries[-1]
        return self.base_offset + relative, position

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of batches at or after ``offset``."""
        self._truncate(bisect_left(self.entries, offset - self.base_offset, key=_OFFSET))
