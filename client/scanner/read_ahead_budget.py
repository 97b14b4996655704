"""The bytes one scanner holds read ahead of its consumer (``client.scanner.max-buffered-bytes``).

Fetch answers not yet polled, remote segment pieces downloading or downloaded, lake batches queued:
all draw on one budget per scanner, so a scanner's memory is bounded whatever its number of
buckets (a per-bucket bound grows with them). A reservation always succeeds when nothing is held,
so a single piece larger than the budget still makes progress instead of waiting forever.
"""

from __future__ import annotations

import threading

# How long a blocked reservation sleeps before it looks at its stop event again.
_STOP_CHECK_S = 0.1


class ReadAheadBudget:
    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 1)
        self._held = 0
        self._changed = threading.Condition()

    @property
    def held(self) -> int:
        return self._held

    def has_room(self, size: int) -> bool:
        """``size`` more bytes may be read ahead now (or nothing is held)."""
        return not self._held or self._held + size <= self.limit

    def try_reserve(self, size: int) -> bool:
        """Hold ``size`` bytes if they fit (or nothing is held); False otherwise."""
        with self._changed:
            if self._held and self._held + size > self.limit:
                return False
            self._held += size
            return True

    def reserve(self, size: int, stop: threading.Event) -> bool:
        """Wait until ``size`` bytes fit, then hold them; False if ``stop`` is set first."""
        with self._changed:
            while self._held and self._held + size > self.limit:
                if stop.is_set():
                    return False
                self._changed.wait(_STOP_CHECK_S)
            self._held += size
            return True

    def add(self, size: int) -> None:
        """Hold ``size`` bytes that already arrived (a fetch answer), whether they fit or not."""
        with self._changed:
            self._held += size

    def release(self, size: int) -> None:
        with self._changed:
            self._held = max(self._held - size, 0)
            self._changed.notify_all()
