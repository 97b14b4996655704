"""The lock a server holds on its data directory while it runs (docs/contract.md, "Operations").

Two servers writing one directory would interleave segment files, truncate each other's tails in
recovery and share one SQLite store; the second must stop before it opens anything. ``flock`` on
``<data-dir>/.lock`` is released by the kernel when the process dies, so a kill -9 leaves no stale
lock to clean up by hand.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from lakelog.errors import DataDirectoryLockedError, StorageError

LOCK_FILE = ".lock"


class DataDirLock:
    """An exclusive, non-blocking lock on ``<directory>/.lock``; :meth:`release` or process exit frees it."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_FILE
        try:
            self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot open the lock file {self.path}: {exc}") from exc
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(self._fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(self._fd)
            self._fd = None
            raise DataDirectoryLockedError(
                f"data directory {directory} is in use by another lakelog server (pid {pid}, lock {self.path}); "
                "stop it or choose another --data-dir"
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
