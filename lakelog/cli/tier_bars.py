"""The status page's per-bucket tier bars, drawn with plain characters for ``lakelog table describe``.

A lane per tier, each :data:`BAR_WIDTH` columns for offsets ``[0, high watermark)``: a column is
filled when the tier holds any offset of it, so a tier holding a few records still shows.
"""

from __future__ import annotations

import math

from lakelog.cli.output_format import NONE_TEXT
from lakelog.metadata import BucketInfo
from lakelog.tier_spans import TIERS, TierSpan, tier_spans

BAR_WIDTH = 40
TIER_CHARS = {"lake": "~", "remote": "#", "local": "="}
LEGEND = ", ".join(f"{TIER_CHARS[tier]} {tier}" for tier in TIERS)


def bar(span: TierSpan | None, high_watermark: int, char: str, width: int = BAR_WIDTH) -> str:
    """``width`` characters: ``char`` where the span lies, blanks elsewhere."""
    if span is None or high_watermark <= 0:
        return " " * width
    left, right = span.scaled(high_watermark)
    first = min(math.floor(left * width), width - 1)
    last = max(math.ceil(right * width), first + 1)
    return " " * first + char * (last - first) + " " * (width - last)


def bucket_lines(bucket: int, info: BucketInfo) -> list[str]:
    """Three lines (lake, remote, local) for a bucket; one line when its leader is down."""
    label = f"bucket {bucket}"
    if not info.leader_available:
        return [f"{label}  leader {info.leader} unavailable"]
    lines = []
    for tier, span in tier_spans(info).items():
        offsets = f"{span.start:,} – {span.end:,}" if span else NONE_TEXT
        lines.append(f"{label:<10}{tier:<8}|{bar(span, info.high_watermark, TIER_CHARS[tier])}|  {offsets}")
        label = ""
    return lines
