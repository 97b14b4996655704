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
        got = 0
        last_progress = time.monotonic()
        while got < expected:
            polled = _take(scanner, form)
            if polled:
                got += polled
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > STALL_S:
                raise RuntimeError(f"{table.path}: only {got} of {expected} records in {STALL_S:.0f} s")
    return got


def _take(scanner: lakelog.LogScanner, form: str) -> int:
    if form == "records":
        return sum(1 for _ in scanner.poll(timeout_ms=1000))
    if form == "pylist":
        return len(scanner.poll_arrow(timeout_ms=1000).to_pylist())
    return scanner.poll_arrow(timeout_ms=1000).num_rows
