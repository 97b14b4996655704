"""Range planning: which offsets ``[start, end)`` of which buckets a job reads, and how they are cut
into pieces. The tiering job (a round's splits) and the Spark reader (a read's or a micro-batch's
partitions) plan with these same functions, so both cut a log the same way.

Buckets are keyed by :data:`~lakelog.metadata.LakeBucketKey`: a bucket number, or
``(partition_id, bucket)`` for a bucket of a partitioned table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from lakelog.metadata import LakeBucketKey, lake_bucket_order, split_lake_bucket_key

# A bucket with a large backlog is read by several tasks at once, and no file grows unbounded.
MAX_RECORDS_PER_SPLIT = 1_000_000


@dataclass(frozen=True)
class BucketRange:
    """Offsets ``[start, end)`` of one bucket (of partition ``partition_id`` of a partitioned
    table): what one task reads."""

    bucket: int
    start: int
    end: int
    partition_id: int | None = None


@dataclass(frozen=True)
class BudgetedRanges:
    """``ranges``: ``{bucket key: (start, end)}`` a record budget allows; ``complete``: the budget cut
    nothing short (every bucket is taken to its end, so a round's snapshot is a cut at its barrier)."""

    ranges: dict[LakeBucketKey, tuple[int, int]]
    complete: bool


def split_range(start: int, end: int, size: int = MAX_RECORDS_PER_SPLIT) -> list[tuple[int, int]]:
    """``[start, end)`` cut into pieces of at most ``size`` offsets."""
    return [(s, min(s + size, end)) for s in range(start, end, size)]


def split_ranges(
    starts: Mapping[LakeBucketKey, int],
    ends: Mapping[LakeBucketKey, int],
    max_records: int = MAX_RECORDS_PER_SPLIT,
    wanted: Callable[[int], bool] = lambda _: True,
) -> list[BucketRange]:
    """Each wanted bucket's ``[start, end)`` cut into pieces of at most ``max_records``, bucket by
    bucket (partition by partition) in offset order; buckets with nothing to read have none."""
    pieces = []
    for key in sorted(ends, key=lake_bucket_order):
        partition_id, bucket = split_lake_bucket_key(key)
        if wanted(bucket):
            pieces += [BucketRange(bucket, s, e, partition_id) for s, e in split_range(starts[key], ends[key], max_records)]
    return pieces


def bucket_ranges(starts: Mapping[LakeBucketKey, int], ends: Mapping[LakeBucketKey, int], max_records: int | None) -> BudgetedRanges:
    """Per bucket with records to read, the range a budget of ``max_records`` allows (``starts`` and
    ``ends`` hold the same buckets; None: no budget).

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
    return BudgetedRanges(
        {b: (starts[b], starts[b] + n) for b, n in sorted(take.items(), key=lambda item: lake_bucket_order(item[0])) if n > 0},
        complete=take == pending,
    )


def barrier_ends(high_watermarks: Mapping[int, int], after_barrier: Mapping[int, int]) -> dict[int, int]:
    """Per bucket, where a range at a barrier B ends: ``after_barrier`` is ListOffsets TIMESTAMP B+1
    (the high watermark when no record is newer than B), capped by the high watermark read before.

    Commit timestamps never decrease in a bucket, so the ranges of all buckets and tables end at the
    same instant B, a consistent cut.
    """
    return {b: min(end, after_barrier.get(b, end)) for b, end in high_watermarks.items()}
