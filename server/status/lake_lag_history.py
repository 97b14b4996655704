"""The lake lag of each table over the last hour, for the status page's line.

In memory and bounded: a ring of at most ``window / interval`` samples per table. A restart starts
an empty line; the lag itself is never lost (it is computed from the stored lake snapshot).
"""

from __future__ import annotations

import threading
from collections import deque

HOUR_MS = 3_600_000


class LakeLagHistory:
    def __init__(self, interval_ms: int, window_ms: int = HOUR_MS) -> None:
        self._window_ms = window_ms
        self._capacity = max(window_ms // interval_ms, 1)
        self._samples: dict[str, deque[tuple[int, int | None]]] = {}
        self._lock = threading.Lock()

    def record(self, now_ms: int, lags: dict[str, int | None]) -> None:
        """One sample per table of ``lags`` (``None``: the lake holds nothing yet); tables missing
        from ``lags`` (dropped) are forgotten."""
        with self._lock:
            self._samples = {table: self._samples.get(table) or deque(maxlen=self._capacity) for table in lags}
            for table, lag in lags.items():
                self._samples[table].append((now_ms, lag))

    def samples(self, table: str, now_ms: int) -> list[tuple[int, int | None]]:
        """``(time ms, lag ms)`` of the last window, oldest first."""
        with self._lock:
            return [sample for sample in self._samples.get(table, ()) if sample[0] > now_ms - self._window_ms]
