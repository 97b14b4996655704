"""Which log ranges a tiering round copies: per bucket ``[lake end, barrier offset)``, capped by the
round's record budget and cut into splits, each one Spark task and one Parquet file.

Each partition of a partitioned table tiers like a table: its buckets are keyed
``(partition_id, bucket)`` (:data:`~lakelog.metadata.LakeBucketKey`) and share the round's budget
and barrier with every other bucket.

The barrier offset of a bucket is its first offset with a commit timestamp after the round's
barrier B (never past the high watermark): commit timestamps never decrease in a bucket, so the
ranges of all buckets and tables end at the same instant B, a consistent cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from lakelog.metadata import LakeBucketKey, TablePath, lake_bucket_key, lake_bucket_order


@dataclass(frozen=True)
class TieringSplit:
    """Offsets ``[start_offset, end_offset)`` of one bucket (of partition ``partition_id``, named
    ``partition_name``, of a partitioned table), to be written to ``file_path``."""

    table: TablePath
    bucket: int
    start_offset: int
    end_offset: int
    file_path: str
    partition_id: int | None = None
    partition_name: str = ""

    @property
    def key(self) -> LakeBucketKey:
        return lake_bucket_key(self.partition_id, self.bucket)


@dataclass(frozen=True)
class BucketRanges:
    """``ranges``: ``{bucket key: (start, end)}`` of a round; ``complete``: the record budget cut nothing
    short (every bucket is taken to its end, so the round's snapshot is a cut at its barrier)."""

    ranges: dict[LakeBucketKey, tuple[int, int]]
    complete: bool


def bucket_ranges(starts: Mapping[LakeBucketKey, int], ends: Mapping[LakeBucketKey, int], max_records: int | None) -> BucketRanges:
    """Per bucket with records to tier, the range this round takes (``starts`` and ``ends`` hold
    the same buckets).

    With a budget, every bucket gets a fair share (water-filling: a bucket that needs less than its
    share leaves the rest to the others), so a busy bucket cannot starve a quiet one.
    """
    pending = {b: ends[b] - starts[b] for b in starts if ends[b] > starts[b]}
    take = dict(pending)
    if max_records is not None:
        remaining = max_records
        for index, (bucket, count) in enumerate(sorted(pending.items(), key=lambda item: (item[1], lake_bucket_order(item[0])))):
            take[bucket] = min(count, remaining // (len(pending) - index))
            remaining -= take[bucket]
    return BucketRanges(
        {b: (starts[b], starts[b] + n) for b, n in sorted(take.items(), key=lambda item: lake_bucket_order(item[0])) if n > 0},
        complete=take == pending,
    )


def barrier_ends(high_watermarks: Mapping[int, int], after_barrier: Mapping[int, int]) -> dict[int, int]:
    """Per bucket, where a round at a barrier ends: ``after_barrier`` is ListOffsets TIMESTAMP B+1
    (the high watermark when no record is newer than B), capped by the high watermark read before."""
    return {b: min(end, after_barrier.get(b, end)) for b, end in high_watermarks.items()}
