"""The bucket's acknowledged-offset checkpoint: how recovery tells a torn write from lost data.

Recovery cuts a torn tail, which only ever holds records no producer was told are safe. If it cuts
below an offset that was durable and acknowledged (media damage in the tail), the next produce would
reuse offsets readers already consumed with other data. So the log checkpoints its durable offset
(every tick and at close, never on the produce path, so it may lag but never leads) and a recovery
that ends below it fences the bucket: writes are refused until an operator accepts the loss.
"""

from __future__ import annotations

import threading
from pathlib import Path

from lakelog.server.log.durable_files import write_atomically

ACKNOWLEDGED_OFFSET_FILE = "acknowledged-offset"


class AcknowledgedOffset:
    """Reads and writes ``<bucket dir>/acknowledged-offset``; skips writes that change nothing.
    Thread-safe: the timer, close and an operator's repair may write at once."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / ACKNOWLEDGED_OFFSET_FILE
        self._lock = threading.Lock()
        try:
            self.stored: int | None = int(self.path.read_text())
        except (FileNotFoundError, ValueError):
            self.stored = None  # never written, or torn before the atomic rename existed: no claim

    def save(self, offset: int) -> None:
        with self._lock:
            if offset != self.stored:
                write_atomically(self.path, str(offset).encode())
                self.stored = offset
