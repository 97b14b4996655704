"""Dense indexes of an uploaded segment: one entry per batch, in the local indexes' entry formats.

The local indexes are sparse (an entry every ``log.index.interval-bytes``) because the server can
walk batch headers on its own disk cheaply; over object storage every step of such a walk would be
a request. So an uploaded segment gets an entry for every batch: ``.index`` maps each batch's
offset (relative, uint32) to its byte position (uint32) and ``.timeindex`` each batch's commit
timestamp (int64) to its relative offset (uint32), big-endian. A lookup is one bisect, exact.

Parsed indexes keep the raw bytes and unpack on access, so a cached index costs its file size.
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from operator import itemgetter
from typing import ClassVar, Iterable

from lakelog.errors import RemoteStorageError
from lakelog.record.batch import BatchHeader
from lakelog.server.log.offset_index import OffsetIndex
from lakelog.server.log.time_index import TimeIndex


class DenseIndex:
    """The entries of one index file as a read-only sequence of tuples, for bisect."""

    ENTRY: ClassVar[struct.Struct]

    def __init__(self, data: bytes, base_offset: int, where: str) -> None:
        if len(data) % self.ENTRY.size:
            raise RemoteStorageError(f"{where}: {len(data)} bytes is not a whole number of index entries")
        self.data = data
        self.base_offset = base_offset

    def __len__(self) -> int:
        return len(self.data) // self.ENTRY.size

    def __getitem__(self, index: int) -> tuple[int, int]:
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self.ENTRY.unpack_from(self.data, index * self.ENTRY.size)  # type: ignore[return-value]


class DenseOffsetIndex(DenseIndex):
    ENTRY = OffsetIndex.ENTRY

    def position_of(self, offset: int) -> int:
        """Byte position of the batch holding ``offset`` (0 before the first entry)."""
        index = bisect_right(self, offset - self.base_offset, key=itemgetter(0)) - 1
        return self[index][1] if index >= 0 else 0


class DenseTimeIndex(DenseIndex):
    ENTRY = TimeIndex.ENTRY

    def offset_of(self, timestamp: int) -> int | None:
        """Base offset of the first batch with a commit timestamp >= ``timestamp``, None if none."""
        index = bisect_left(self, timestamp, key=itemgetter(0))
        return self.base_offset + self[index][1] if index < len(self) else None


@dataclass(frozen=True)
class DenseIndexes:
    """Both index files of a segment, built from its batch headers, and what they tell about it."""

    offset_index: bytes
    time_index: bytes
    max_timestamp: int

    @classmethod
    def build(cls, base_offset: int, batches: Iterable[tuple[int, BatchHeader]]) -> DenseIndexes:
        offsets, times = bytearray(), bytearray()
        max_timestamp = -1
        for position, header in batches:
            relative = header.base_offset - base_offset
            offsets += DenseOffsetIndex.ENTRY.pack(relative, position)
            times += DenseTimeIndex.ENTRY.pack(header.commit_timestamp, relative)
            max_timestamp = max(max_timestamp, header.commit_timestamp)
        return cls(bytes(offsets), bytes(times), max_timestamp)
