"""Damaged rolled segments, set aside at recovery instead of cut.

A rolled segment was fsynced whole before the next one began, so damage inside it is not a torn
write: cutting it would drop acknowledged records and leave the bucket stuck at that offset. It is
renamed to ``<base>.log.quarantined`` and its offsets become a :class:`QuarantinedRange`, a hole
between the segments around it that reads fail on by name (or that the remote tier serves, when it
holds a copy). The holes are found again from the files at every start, so nothing else records them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from lakelog.server.log.segment import QUARANTINE_SUFFIX, LogSegment

QUARANTINED_GLOB = f"*.log{QUARANTINE_SUFFIX}"


@dataclass(frozen=True)
class QuarantinedRange:
    """Offsets ``[start, end)`` no local segment holds; ``path`` is the quarantined file, if any."""

    start: int
    end: int
    path: Path | None

    def __contains__(self, offset: int) -> bool:
        return self.start <= offset < self.end

    def describe(self, bucket_name: str) -> str:
        where = self.path if self.path is not None else "missing segment files"
        return f"{where}: offsets [{self.start}, {self.end}) of {bucket_name} are in a damaged segment set aside at recovery"


def quarantined_base(path: Path) -> int | None:
    stem = path.name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else None


def find_holes(directory: Path, segments: Sequence[LogSegment], log_start: int) -> tuple[QuarantinedRange, ...]:
    """The ranges between ``log_start`` and the live segments that no segment holds: before the
    first one only where a quarantined file says so, between two of them wherever they do not meet."""
    files = sorted((base, path) for path in directory.glob(QUARANTINED_GLOB) if (base := quarantined_base(path)) is not None)
    holes: list[QuarantinedRange] = []
    expected = log_start
    for index, segment in enumerate(segments):
        if segment.base_offset > expected:
            inside = {base: path for base, path in files if expected <= base < segment.base_offset}
            if index > 0 or inside:
                # One range per quarantined file (two neighbours set aside are two files), so a
                # read names the file that holds its offset.
                starts = sorted({expected, *inside})
                for start, end in zip(starts, [*starts[1:], segment.base_offset]):
                    holes.append(QuarantinedRange(start, end, inside.get(start)))
        expected = max(expected, segment.next_offset)
    return tuple(holes)
