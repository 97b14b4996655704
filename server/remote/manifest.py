"""The per-bucket manifest: the one record of which remote segments exist.

It is immutable here: every change makes a new manifest with the next version, which the storage
writes atomically, so a reader sees the old list or the new one, never half of each. It carries the
leader epoch of the server that wrote it, so a server that still believes it leads after a newer
leader took over (cut off from the coordinator) finds out before it writes over the newer list.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from dataclasses import asdict, dataclass, replace
from typing import Iterable

from lakelog.errors import RemoteStorageError
from lakelog.fetch_info import RemoteLogSegment

MANIFEST_FILE = "manifest.json"


@dataclass(frozen=True)
class RemoteLogManifest:
    """The remote segments of one bucket, oldest first and contiguous; ``version`` counts writes;
    ``leader_epoch`` is the writer's (-1: a bucket without epochs, or a manifest from before them)."""

    version: int = 0
    segments: tuple[RemoteLogSegment, ...] = ()
    leader_epoch: int = -1

    @property
    def start_offset(self) -> int:
        """The first remote offset, -1 when the remote tier is empty."""
        return self.segments[0].start_offset if self.segments else -1

    @property
    def end_offset(self) -> int:
        """The offset after the last remote record (exclusive), -1 when the remote tier is empty."""
        return self.segments[-1].end_offset if self.segments else -1

    def index_of(self, offset: int) -> int | None:
        """Index in :attr:`segments` of the segment holding ``offset``, None outside the range."""
        index = bisect_right(self.segments, offset, key=lambda segment: segment.start_offset) - 1
        return index if index >= 0 and offset < self.segments[index].end_offset else None

    def appended(self, segment: RemoteLogSegment) -> RemoteLogManifest:
        return replace(self, version=self.version + 1, segments=(*self.segments, segment))

    def without_oldest(self, count: int) -> RemoteLogManifest:
        return replace(self, version=self.version + 1, segments=self.segments[count:])

    def to_json(self) -> bytes:
        return json.dumps({"version": self.version, "leader_epoch": self.leader_epoch, "segments": [asdict(s) for s in self.segments]}).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> RemoteLogManifest:
        try:
            raw = json.loads(data)
            segments = tuple(
                RemoteLogSegment(
                    str(s["segment_id"]),
                    int(s["start_offset"]),
                    int(s["end_offset"]),
                    int(s["max_timestamp"]),
                    int(s["size_in_bytes"]),
                )
                for s in raw["segments"]
            )
            return cls(int(raw["version"]), segments, int(raw.get("leader_epoch", -1)))
        except (ValueError, KeyError, TypeError) as exc:
            raise RemoteStorageError(f"{where}: not a remote log manifest: {exc!r}") from None


def contiguous_run(segments: Iterable[RemoteLogSegment]) -> tuple[RemoteLogSegment, ...]:
    """Of segments found in storage, the contiguous run (each starting where the previous ends)
    that reaches the highest offset, the longest among those; a duplicate of a range (an upload
    retried under a new id) is taken once, the lowest id. Segments that start at one offset may end
    at different ones (two leaders rolled their segments at different offsets), so every one of
    them is followed: the shortest alone could end where nothing continues."""
    by_start: dict[int, list[RemoteLogSegment]] = {}
    for segment in sorted(segments, key=lambda s: (s.start_offset, s.end_offset, s.segment_id)):
        if segment.end_offset > segment.start_offset:
            by_start.setdefault(segment.start_offset, []).append(segment)
    # From each start, later starts first: (offset reached, segments in the run, first segment).
    best_from: dict[int, tuple[int, int, RemoteLogSegment]] = {}
    for start in sorted(by_start, reverse=True):
        for segment in by_start[start]:
            reach, length = best_from[segment.end_offset][:2] if segment.end_offset in best_from else (segment.end_offset, 0)
            if start not in best_from or (reach, length + 1) > best_from[start][:2]:
                best_from[start] = (reach, length + 1, segment)
    if not best_from:
        return ()
    offset = max(best_from, key=lambda start: (*best_from[start][:2], -start))
    run = []
    while offset in best_from:
        segment = best_from[offset][2]
        run.append(segment)
        offset = segment.end_offset
    return tuple(run)
