"""Small files that must survive a crash whole: checkpoints written beside a bucket's segments."""

from __future__ import annotations

import os
from pathlib import Path

from lakelog.errors import StorageError


def fsync_directory(directory: Path) -> None:
    """Make a file creation, rename or deletion in ``directory`` survive a crash."""
    try:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StorageError(f"cannot fsync directory {directory}: {exc}") from exc


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old content or the new, never half:
    a temporary file, fsynced, renamed over it, the directory fsynced."""
    temporary = path.with_suffix(".tmp")
    try:
        with open(temporary, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc}") from exc
    fsync_directory(path.parent)
