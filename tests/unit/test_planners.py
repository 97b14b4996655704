"""The planners alone: how a tiering round shares its record budget between buckets and where its
barrier cuts them, how ranges are cut into splits, which small lake files a compaction merges,
which snapshots an expiry keeps, and where each tier of a bucket lies."""

from __future__ import annotations

import pytest

from lakelog.lake.iceberg_scan_planner import LakeDataFile
from lakelog.log_ranges import barrier_ends, bucket_ranges, split_range
from lakelog.metadata import BucketInfo, LakeBucketKey
from lakelog.tier_spans import TierSpan, tier_spans
from lakelog.tiering.compaction_planner import plan_bins, worth_it
from lakelog.tiering.snapshot_retention import SnapshotEntry, snapshots_to_keep

# ---------------------------------------------------------------- a tiering round's ranges


def test_without_a_budget_every_bucket_is_taken_to_its_end_and_empty_ones_are_left_out() -> None:
    planned = bucket_ranges({0: 10, 1: 50, 2: 7}, {0: 100, 1: 50, 2: 9}, max_records=None)
    assert planned.ranges == {0: (10, 100), 2: (7, 9)}
    assert planned.complete


def test_a_budget_is_shared_fairly_so_a_busy_bucket_cannot_starve_a_quiet_one() -> None:
    planned = bucket_ranges({0: 0, 1: 0, 2: 0}, {0: 1_000_000, 1: 30, 2: 1_000_000}, max_records=1000)
    assert planned.ranges == {0: (0, 485), 1: (0, 30), 2: (0, 485)}
    assert sum(end - start for start, end in planned.ranges.values()) == 1000
    assert not planned.complete


def test_a_budget_that_covers_everything_leaves_the_round_complete() -> None:
    planned = bucket_ranges({0: 5, 1: 0}, {0: 15, 1: 20}, max_records=30)
    assert planned.ranges == {0: (5, 15), 1: (0, 20)} and planned.complete


def test_partitions_buckets_share_one_budget_and_come_out_in_partition_then_bucket_order() -> None:
    starts: dict[LakeBucketKey, int] = {(41, 0): 0, (40, 1): 0, (40, 0): 0}
    ends: dict[LakeBucketKey, int] = {(41, 0): 100, (40, 1): 100, (40, 0): 100}
    planned = bucket_ranges(starts, ends, max_records=90)
    assert list(planned.ranges) == [(40, 0), (40, 1), (41, 0)]
    assert all(end - start == 30 for start, end in planned.ranges.values())


def test_a_budget_smaller_than_the_buckets_gives_some_buckets_nothing_this_round() -> None:
    planned = bucket_ranges({b: 0 for b in range(4)}, {b: 100 for b in range(4)}, max_records=2)
    assert sum(end - start for start, end in planned.ranges.values()) == 2
    assert len(planned.ranges) == 2 and not planned.complete


@pytest.mark.parametrize(
    ("high_watermarks", "after_barrier", "ends"),
    [
        ({0: 100, 1: 50}, {0: 80, 1: 50}, {0: 80, 1: 50}),
        ({0: 100}, {0: 120}, {0: 100}),
        ({0: 100, 1: 40}, {0: 70}, {0: 70, 1: 40}),
    ],
    ids=["cut at the barrier", "never past the high watermark", "no answer: the high watermark"],
)
def test_a_round_ends_each_bucket_at_its_first_record_after_the_barrier(
    high_watermarks: dict[int, int], after_barrier: dict[int, int], ends: dict[int, int]
) -> None:
    assert barrier_ends(high_watermarks, after_barrier) == ends


@pytest.mark.parametrize(
    ("start", "end", "size", "pieces"),
    [
        (0, 10, 4, [(0, 4), (4, 8), (8, 10)]),
        (5, 9, 10, [(5, 9)]),
        (7, 7, 3, []),
        (0, 6, 3, [(0, 3), (3, 6)]),
    ],
)
def test_a_range_is_cut_into_pieces_of_at_most_the_size(start: int, end: int, size: int, pieces: list[tuple[int, int]]) -> None:
    assert split_range(start, end, size) == pieces


# ---------------------------------------------------------------- compaction bins

TARGET = 1000


def _files(*spans: tuple[int, int, int]) -> list[LakeDataFile]:
    """Files of one bucket: ``(first offset, last offset, size)`` each."""
    return [LakeDataFile(f"s3://wh/t/data/dt=d1/b0/{first}.parquet", first, last, None, size, last - first + 1) for first, last, size in spans]


def test_neighbouring_small_files_merge_into_bins_up_to_the_target() -> None:
    files = _files((0, 9, 300), (10, 19, 300), (20, 29, 300), (30, 39, 300))
    bins = plan_bins({("d1", 0): files}, TARGET)
    assert [[f.first_offset for f in b.files] for b in bins] == [[0, 10, 20]]
    [merged] = bins
    assert (merged.first_offset, merged.end_offset, merged.record_count, merged.size_bytes) == (0, 30, 30, 900)
    assert merged.file_path.startswith("s3://wh/t/data/dt=d1/b0/") and merged.file_path != files[0].path


def test_a_file_near_the_target_is_left_alone_and_breaks_the_run() -> None:
    files = _files((0, 9, 100), (10, 19, 900), (20, 29, 100), (30, 39, 100))
    bins = plan_bins({("", 0): files}, TARGET)
    assert [[f.first_offset for f in b.files] for b in bins] == [[20, 30]]


def test_files_with_a_gap_between_them_are_not_merged() -> None:
    bins = plan_bins({("", 0): _files((0, 9, 10), (20, 29, 10))}, TARGET)
    assert bins == []


def test_each_bucket_is_planned_on_its_own() -> None:
    by_bucket = {("", 1): _files((0, 4, 10), (5, 9, 10)), ("", 0): _files((0, 4, 10))}
    bins = plan_bins(by_bucket, TARGET)
    assert [b.bucket for b in bins] == [("", 1)]


def test_a_bin_is_worth_it_with_enough_files_or_once_its_file_is_no_longer_small() -> None:
    [two_small] = plan_bins({("", 0): _files((0, 4, 10), (5, 9, 10))}, TARGET)
    [grown] = plan_bins({("", 0): _files((0, 4, 400), (5, 9, 400))}, TARGET)
    assert not worth_it(two_small, TARGET, min_files=5)
    assert worth_it(two_small, TARGET, min_files=2)
    assert worth_it(grown, TARGET, min_files=5)


# ---------------------------------------------------------------- snapshot retention

HOUR = 3_600_000
SNAPSHOTS = [SnapshotEntry(10, 1, 0), SnapshotEntry(11, 2, 5 * HOUR), SnapshotEntry(12, 3, 9 * HOUR), SnapshotEntry(13, 4, 10 * HOUR)]


def test_snapshots_replaced_longer_ago_than_the_retention_expire() -> None:
    kept = snapshots_to_keep(SNAPSHOTS, current=13, coordinator=13, needed=(), retention_ms=2 * HOUR, now_ms=10 * HOUR)
    assert kept == {11, 12, 13}, "11 was replaced an hour ago by 12; 10 five hours ago, by 11"


def test_an_idle_table_keeps_its_only_snapshot_however_old() -> None:
    old = [SnapshotEntry(1, 1, 0)]
    assert snapshots_to_keep(old, current=1, coordinator=1, needed=(), retention_ms=HOUR, now_ms=1000 * HOUR) == {1}


def test_the_coordinator_s_snapshot_and_those_consistent_cuts_answer_are_kept() -> None:
    kept = snapshots_to_keep(SNAPSHOTS, current=13, coordinator=11, needed=[10, 99], retention_ms=0, now_ms=100 * HOUR)
    assert kept == {10, 11, 13}, "99 is not a snapshot of this table"


def test_retention_counts_from_when_a_snapshot_was_replaced_not_committed() -> None:
    entries = [SnapshotEntry(1, 1, 0), SnapshotEntry(2, 2, 50 * HOUR)]
    assert snapshots_to_keep(entries, 2, 2, (), retention_ms=3 * HOUR, now_ms=51 * HOUR) == {1, 2}


# ---------------------------------------------------------------- tier spans


def test_each_tier_is_its_own_span_and_empty_tiers_have_none() -> None:
    info = BucketInfo(1, high_watermark=1000, local_log_start_offset=600, remote_log_start_offset=200, remote_log_end_offset=700,
                      lake_log_start_offset=0, lake_log_end_offset=500)
    assert tier_spans(info) == {"lake": TierSpan(0, 500), "remote": TierSpan(200, 700), "local": TierSpan(600, 1000)}
    local_only = BucketInfo(1, high_watermark=10, local_log_start_offset=0)
    assert tier_spans(local_only) == {"lake": None, "remote": None, "local": TierSpan(0, 10)}


def test_a_bucket_whose_leader_is_down_shows_no_tier() -> None:
    assert tier_spans(BucketInfo.unavailable(3)) == {"lake": None, "remote": None, "local": None}


@pytest.mark.parametrize(
    ("span", "high_watermark", "scaled"),
    [(TierSpan(250, 750), 1000, (0.25, 0.75)), (TierSpan(0, 2000), 1000, (0.0, 1.0)), (TierSpan(0, 10), 0, (0.0, 0.0))],
    ids=["inside", "clamped", "empty bucket"],
)
def test_a_span_scales_to_its_share_of_the_high_watermark(span: TierSpan, high_watermark: int, scaled: tuple[float, float]) -> None:
    assert span.scaled(high_watermark) == scaled
