"""The bytes one scanner holds read ahead of its consumer (``client.scanner.max-buffered-bytes``).

Fetch answers not yet polled, remote segment pieces downloading or downloaded, lake batches queued:
all draw on one budget per scanner, so a scanner's memory is bounded whatever its number of
buckets (a per-bucket bound grows with them). A reservation always succeeds when nothing is held,
so a single piece larger than the budget still makes progress instead of waiting forever.

Readers that pull on threads of their own (a lake-only partition's lake readers) are bounded by the
same budget: one holds a batch in hand while it waits for room, and opens a LogSource read, so
only ``limit // READER_BYTES`` of them (at least one) are open at once per scanner.
"""

from __future__ import annotations

import threading

# How long a blocked reservation sleeps before it looks at its stop event again.
_STOP_CHECK_S = 0.1
# What one open reader counts for when the budget sets how many may be open at once: a read's worth.
READER_BYTES = 4 << 20


class ReadAheadBudget:
    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 1)
        self._held = 0
        self._changed = threading.Condition()
        self.max_readers = max(self.limit // READER_BYTES, 1)
        self._readers = 0

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

    def try_open_reader(self) -> bool:
        """Count one more open reader if fewer than :attr:`max_readers` are; False otherwise (its
        turn comes when one closes)."""
        with self._changed:
            if self._readers >= self.max_readers:
                return False
            self._readers += 1
            return True

    def reader_closed(self) -> None:
        with self._changed:
            self._readers = max(self._readers - 1, 0)
