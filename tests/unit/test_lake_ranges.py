"""What a tablet server holds of the lake per bucket, as notifications arrive (no server: the class alone)."""

from __future__ import annotations

from lakelog.cluster_state import LakeOffsets
from lakelog.metadata import LakeBucketOffset, LakeSnapshot
from lakelog.server.replica.lake_offsets import LakeRanges

TABLE = 7


def notified(snapshot_id: int, end_offset: int) -> LakeOffsets:
    return LakeOffsets(TABLE, LakeSnapshot(snapshot_id, {0: LakeBucketOffset(0, end_offset, 1_000)}))


def test_a_later_snapshot_ending_where_the_held_one_ends_replaces_it_whatever_its_id() -> None:
    ranges = LakeRanges()
    ranges.update([notified(900, 50)])
    ranges.update([notified(100, 50)])  # a compaction's rewrite of snapshot 900, with a smaller random id
    held = ranges.get(TABLE, 0)
    assert held is not None and (held.snapshot_id, held.end_offset) == (100, 50)


def test_a_snapshot_ending_before_the_held_one_never_moves_the_bucket_back() -> None:
    ranges = LakeRanges()
    ranges.update([notified(5, 80)])
    ranges.update([notified(9, 40)])
    held = ranges.get(TABLE, 0)
    assert held is not None and (held.snapshot_id, held.end_offset) == (5, 80)
    assert ranges.end_offset(TABLE, 0) == 80
