"""Where a bucket's history lives, as offset spans per tier, scaled to its high watermark.

One definition for every picture of a bucket (the coordinator's status page, ``lakelog table
describe``), so a bar in the browser and a bar in the terminal never disagree. Tiers overlap (the
lake and remote storage keep what local disk still holds until retention drops it), so each tier
is its own lane over offsets ``[0, high watermark)``, not one slice of a shared bar.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakelog.metadata import BucketInfo

TIERS = ("lake", "remote", "local")


@dataclass(frozen=True)
class TierSpan:
    """Offsets ``[start, end)`` of one tier."""

    start: int
    end: int

    def scaled(self, high_watermark: int) -> tuple[float, float]:
        """``(left, right)`` as fractions of ``[0, high_watermark)``, clamped to ``[0, 1]``."""
        if high_watermark <= 0:
            return 0.0, 0.0
        left, right = (min(max(offset / high_watermark, 0.0), 1.0) for offset in (self.start, self.end))
        return left, right


def tier_spans(info: BucketInfo) -> dict[str, TierSpan | None]:
    """Per tier in :data:`TIERS` order, its span, ``None`` where it holds nothing (or the leader is down)."""
    if not info.leader_available:
        return dict.fromkeys(TIERS)
    ranges = {
        "lake": (info.lake_log_start_offset, info.lake_log_end_offset),
        "remote": (info.remote_log_start_offset, info.remote_log_end_offset),
        "local": (info.local_log_start_offset, info.high_watermark),
    }
    return {tier: TierSpan(start, end) if 0 <= start < end else None for tier, (start, end) in ranges.items()}
