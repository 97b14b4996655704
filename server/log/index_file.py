"""The file under both sparse segment indexes: fixed-size big-endian entries, appended in order.

The whole index lives in memory as a list of tuples so a lookup is one bisect and never touches the
disk; the file exists only so a restart need not rescan the segment. An index that fails to load
(a torn last entry, entries out of order) is reported through :attr:`IndexFile.intact` rather than
raised, because the segment owns the cure: it rebuilds the index from its log.
"""

from __future__ import annotations

import os
import struct
import weakref
from pathlib import Path
from typing import ClassVar

from lakelog.errors import StorageError


class IndexFile:
    """Entries of ``ENTRY`` kept sorted by append order; subclasses say what "in order" means."""

    ENTRY: ClassVar[struct.Struct]

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        try:
            self._fd = fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            # A finalizer rather than a bare os.close: calling it twice is harmless, so close() and
            # delete() can both release the descriptor without risking closing someone else's.
            self._release = weakref.finalize(self, os.close, fd)
            data = os.pread(fd, os.fstat(fd).st_size, 0)
        except OSError as exc:
            raise StorageError(f"cannot open index {path}: {exc}") from exc
        whole = len(data) % self.ENTRY.size == 0
        entries = list(self.ENTRY.iter_unpack(data)) if whole else []
        self.intact = whole and all(map(self._ordered, entries, entries[1:]))
        self.entries: list[tuple[int, int]] = entries if self.intact else []

    @staticmethod
    def _ordered(previous: tuple[int, int], entry: tuple[int, int]) -> bool:
        raise NotImplementedError

    def _append(self, entry: tuple[int, int]) -> None:
        if self.entries and not self._ordered(self.entries[-1], entry):
            raise ValueError(f"{self.path}: entry {entry} does not follow {self.entries[-1]}")
        try:
            os.pwrite(self._fd, self.ENTRY.pack(*entry), len(self.entries) * self.ENTRY.size)
        except OSError as exc:
            raise StorageError(f"cannot write index {self.path}: {exc}") from exc
        self.entries.append(entry)

    def _truncate(self, count: int) -> None:
        """Keep the first ``count`` entries, in memory and on disk."""
        del self.entries[count:]
        try:
            os.ftruncate(self._fd, count * self.ENTRY.size)
        except OSError as exc:
            raise StorageError(f"cannot truncate index {self.path}: {exc}") from exc
        self.intact = True

    def flush(self) -> None:
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise StorageError(f"cannot fsync index {self.path}: {exc}") from exc

    def close(self) -> None:
        """Release the file; lookups keep working from memory."""
        self._release()

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
