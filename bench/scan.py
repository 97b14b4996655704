"""Reading a table to the end through lakelog's scanner, as a consumer would."""

from __future__ import annotations

import time
from typing import Sequence

import lakelog

# Long enough for a first Spark-backed scan to start Spark on a loaded machine.
STALL_S = 300.0


def drain(table: lakelog.Table, expected: int, columns: Sequence[str] | None = None, form: str = "arrow") -> int:
    """Poll ``table`` from the beginning until ``expected`` records came back; the records are
    dropped as they arrive (a consumer that keeps them would measure its own memory, not lakelog's).
    ``form`` is how they are taken: ``arrow`` (``poll_arrow``), ``records`` (each ``ScanRecord`` of
    ``poll()``) or ``pylist`` (``poll_arrow().to_pylist()``, the rows as dicts)."""
    scan = table.new_scan()
    if columns is not None:
        scan = scan.project(list(columns))
    with scan.create_log_scanner() as scanner:
        scanner.subscribe_from_beginning()
        count = DrainCount(str(table.path), expected)
        while not count.done:
            count.add(_take(scanner, form))
    return count.got


class DrainCount:
    """Records polled so far toward ``expected``; a drain that gets none for ``STALL_S`` fails."""

    def __init__(self, label: str, expected: int) -> None:
        self.label, self.expected, self.got = label, expected, 0
        self._last_progress = time.monotonic()

    @property
    def done(self) -> bool:
        return self.got >= self.expected

    def add(self, polled: int) -> None:
        if polled:
            self.got += polled
            self._last_progress = time.monotonic()
        elif time.monotonic() - self._last_progress > STALL_S:
            raise RuntimeError(f"{self.label}: only {self.got} of {self.expected} records in {STALL_S:.0f} s")


def _take(scanner: lakelog.LogScanner, form: str) -> int:
    if form == "records":
        return sum(1 for _ in scanner.poll(timeout_ms=1000))
    if form == "pylist":
        return len(scanner.poll_arrow(timeout_ms=1000).to_pylist())
    return scanner.poll_arrow(timeout_ms=1000).num_rows
