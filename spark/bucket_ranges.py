"""The driver's plan of a Spark read: per bucket the offset range ``[start, end)`` to read, cut into
pieces of at most ``maxRecordsPerPartition`` records, one Spark partition each.

Every end is fixed here, once, and never past the high watermark read at plan time, so a DataFrame is
a bounded, repeatable snapshot of the log however long its tasks take and however much is produced
meanwhile. Pieces are cut by record count, not at tier boundaries: a task reads its range through one
LogScanner, which crosses lake, remote and local tiers by itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from lakelog.client.admin import Admin
from lakelog.errors import InvalidConfigError
from lakelog.metadata import OffsetSpec, TableInfo
from lakelog.record.meta_columns import OFFSET_COLUMN, TIMESTAMP_COLUMN
from lakelog.spark.pushed_filters import UNBOUNDED, PushedFilters
from lakelog.spark.read_options import OffsetBound
from lakelog.client.scanner.offset_range import split_range


@dataclass(frozen=True)
class BucketRange:
    """Offsets ``[start, end)`` of one bucket: what one Spark task reads."""

    bucket: int
    start: int
    end: int


def resolve_bound(admin: Admin, info: TableInfo, bound: OffsetBound) -> dict[int, int]:
    """Per bucket of the table, the offset ``bound`` names (timestamps resolved by the servers, and
    by the lake for what only the lake holds)."""
    buckets = range(info.buckets)
    unknown = sorted(set(bound.per_bucket) - set(buckets))
    if unknown:
        raise InvalidConfigError(
            f"lakelog Spark option {bound.option!r} names bucket {unknown[0]}, but {info.path} has buckets 0..{info.buckets - 1}"
        )
    if isinstance(bound.default, OffsetSpec):
        offsets = admin.list_offsets(info.path, buckets, bound.default)
    else:
        offsets = dict.fromkeys(buckets, bound.default)
    return {**offsets, **bound.per_bucket}


def plan_ranges(
    admin: Admin, info: TableInfo, start: OffsetBound, end: OffsetBound, max_records: int, pushed: PushedFilters | None = None
) -> list[BucketRange]:
    """The pieces to read, bucket by bucket in offset order; buckets with nothing to read have none.
    ``pushed`` narrows the options' ranges by the filters Spark pushed down."""
    pushed = pushed or PushedFilters.none()
    latest = admin.list_offsets(info.path, spec=OffsetSpec.latest())
    starts = resolve_bound(admin, info, start)
    ends = {bucket: min(offset, latest[bucket]) for bucket, offset in resolve_bound(admin, info, end).items()}
    low, high = pushed.bounds[OFFSET_COLUMN]
    starts = {bucket: max(offset, low) for bucket, offset in starts.items()}
    ends = {bucket: min(offset, high) for bucket, offset in ends.items()}
    low_ms, high_ms = pushed.bounds[TIMESTAMP_COLUMN]
    if (low_ms, high_ms) != UNBOUNDED:
        # First offsets at or past each timestamp bound: timestamps never decrease within a bucket.
        at_low = admin.list_offsets(info.path, spec=OffsetSpec.timestamp(low_ms)) if low_ms > UNBOUNDED[0] else starts
        at_high = admin.list_offsets(info.path, spec=OffsetSpec.timestamp(high_ms)) if high_ms < UNBOUNDED[1] else ends
        starts = {bucket: max(offset, at_low[bucket]) for bucket, offset in starts.items()}
        ends = {bucket: min(offset, at_high[bucket]) for bucket, offset in ends.items()}
    return split_ranges(starts, ends, max_records, pushed.bucket_wanted)


def split_ranges(
    starts: Mapping[int, int], ends: Mapping[int, int], max_records: int, wanted: Callable[[int], bool] = lambda _: True
) -> list[BucketRange]:
    """Each wanted bucket's ``[start, end)`` cut into pieces of at most ``max_records``, bucket by
    bucket in offset order: a batch read's partitions, and a stream's for one micro-batch."""
    return [
        BucketRange(bucket, s, e)
        for bucket in sorted(starts)
        if wanted(bucket)
        for s, e in split_range(starts[bucket], ends[bucket], max_records)
    ]
