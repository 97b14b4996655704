"""Which log ranges a tiering round copies: per bucket ``[lake end, high watermark)``, capped by the
round's record budget and cut into splits, each one Spark task and one Parquet file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from lakelog.metadata import TablePath

# A bucket with a large backlog is read by several tasks at once, and no file grows unbounded.
MAX_RECORDS_PER_SPLIT = 1_000_000


@dataclass(frozen=True)
class TieringSplit:
    """Offsets ``[start_offset, end_offset)`` of one bucket, to be written to ``file_path``."""

    table: TablePath
    bucket: int
    start_offset: int
    end_offset: int
    file_path: str


def bucket_ranges(
    starts: Mapping[int, int], ends: Mapping[int, int], max_records: int | None
) -> dict[int, tuple[int, int]]:
    """Per bucket with records to tier, the range this round takes.

    With a budget, every bucket gets a fair share (water-filling: a bucket that needs less than its
    share leaves the rest to the others), so a busy bucket cannot starve a quiet one.
    """
    pending = {b: ends[b] - starts[b] for b in starts if b in ends and ends[b] > starts[b]}
    take = dict(pending)
    if max_records is not None:
        remaining = max_records
        for index, (bucket, count) in enumerate(sorted(pending.items(), key=lambda item: item[1])):
            take[bucket] = min(count, remaining // (len(pending) - index))
            remaining -= take[bucket]
    return {b: (starts[b], starts[b] + n) for b, n in sorted(take.items()) if n > 0}


def split_range(start: int, end: int) -> list[tuple[int, int]]:
    """``[start, end)`` cut into pieces of at most :data:`MAX_RECORDS_PER_SPLIT` offsets."""
    return [(s, min(s + MAX_RECORDS_PER_SPLIT, end)) for s in range(start, end, MAX_RECORDS_PER_SPLIT)]
