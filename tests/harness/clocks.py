"""Clocks a test sets by hand, so time rules run without sleeping."""

from __future__ import annotations


class FakeClock:
    """A settable millisecond clock, so roll-by-age and timestamp rules run without sleeping."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now
