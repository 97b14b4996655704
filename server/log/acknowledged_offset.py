"""The bucket's acknowledged-offset checkpoint: how recovery tells a torn write from lost data.

Recovery cuts a torn tail, which only ever holds records no producer was told are safe. If it cuts
below an offset that was durable and acknowledged (media damage in the tail), the next produce would
reuse offsets readers already consumed with other data. So the log checkpoints its durable offset
(every tick and at close, never on the produce path, so it may lag but never leads) and a recovery
that ends below it fences the bucket: writes are refused until an operator accepts the loss.

A tablet server keeps every bucket's offset in one file per log directory,
``<log dir>/acknowledged-offset-checkpoint``, written at most once per tick, as Kafka keeps its
recovery points: a file per bucket costs two fsyncs (the file, its directory) for each bucket
written to, every second, which grows with the buckets. A log opened alone keeps its offset beside
its segments, in ``<bucket dir>/acknowledged-offset``; a log directory's checkpoint takes such a
file over when it opens the bucket, and deletes it once its own file holds the value.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Protocol

from lakelog.errors import StorageError
from lakelog.server.log.durable_files import write_atomically

ACKNOWLEDGED_OFFSET_FILE = "acknowledged-offset"
CHECKPOINT_FILE = "acknowledged-offset-checkpoint"
_CHECKPOINT_VERSION = "0"

logger = logging.getLogger(__name__)


class AcknowledgedOffset(Protocol):
    """One bucket's acknowledged offset, as its log sees it."""

    @property
    def stored(self) -> int | None:
        """The offset recorded (None: never, no claim)."""

    def save(self, offset: int) -> None:
        """Record ``offset``, durable when this returns."""

    def note(self, offset: int) -> None:
        """Record ``offset``, durable at the owner's next flush (a log alone: at once)."""


def _read_offset(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (FileNotFoundError, ValueError):
        return None  # never written, or torn before the atomic rename existed: no claim


class AcknowledgedOffsetFile:
    """A log alone: its offset in ``<bucket dir>/acknowledged-offset``; skips writes that change
    nothing. Thread-safe: the timer, close and an operator's repair may write at once."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / ACKNOWLEDGED_OFFSET_FILE
        self._lock = threading.Lock()
        self.stored: int | None = _read_offset(self.path)

    def save(self, offset: int) -> None:
        with self._lock:
            if offset != self.stored:
                write_atomically(self.path, str(offset).encode())
                self.stored = offset

    def note(self, offset: int) -> None:
        self.save(offset)


class AcknowledgedOffsetCheckpoint:
    """Every bucket's acknowledged offset under one log directory, in
    ``<root>/acknowledged-offset-checkpoint``: a version line, then ``<bucket dir> <offset>`` per
    bucket, the directory relative to ``root``. Thread-safe."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / CHECKPOINT_FILE
        self._lock = threading.Lock()
        self._written = self._load()  # what the file holds
        # A bucket directory deleted while the server was down takes its claim with it, as a file
        # of its own would have gone: the bucket starts over, unfenced.
        self._offsets = {key: offset for key, offset in self._written.items() if (root / key).is_dir()}
        self._taken_over: list[Path] = []

    def _load(self) -> dict[str, int]:
        """The stored offsets; none when the file is damaged, which is reported: the offsets only
        guard against media damage, so the logs open without that guard."""
        try:
            return self.read(self.root)
        except StorageError as error:
            logger.error("%s; the logs under %s open without their acknowledged offsets", error, self.root)
            return {}

    @staticmethod
    def read(root: Path) -> dict[str, int]:
        """The offsets ``<root>/acknowledged-offset-checkpoint`` holds (none when it is missing)."""
        path = root / CHECKPOINT_FILE
        try:
            version, *lines = path.read_text().splitlines() or [""]
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc
        try:
            if version != _CHECKPOINT_VERSION:
                raise ValueError(f"version {version!r}, expected {_CHECKPOINT_VERSION}")
            return {key: int(offset) for key, offset in (line.rsplit(" ", 1) for line in lines)}
        except ValueError as exc:
            raise StorageError(f"{path} is damaged ({exc})") from exc

    def bucket(self, directory: Path) -> AcknowledgedOffset:
        """The offset of the log in ``directory`` (under ``root``), taking over the file a log
        alone left there."""
        key = directory.relative_to(self.root).as_posix()
        alone = directory / ACKNOWLEDGED_OFFSET_FILE
        offset = _read_offset(alone)
        with self._lock:
            if offset is not None:
                self._offsets.setdefault(key, offset)
                self._taken_over.append(alone)
        return _InCheckpoint(self, key)

    def stored(self, key: str) -> int | None:
        with self._lock:
            return self._offsets.get(key)

    def record(self, key: str, offset: int) -> None:
        with self._lock:
            self._offsets[key] = offset

    def forget(self, directory: Path) -> None:
        """Drop the offsets of the logs under ``directory`` (deleted with their table)."""
        prefix = directory.relative_to(self.root).as_posix() + "/"
        with self._lock:
            for key in [key for key in self._offsets if key.startswith(prefix)]:
                del self._offsets[key]

    def flush(self) -> None:
        """Write the file if any offset changed since it was last written."""
        with self._lock:
            if self._offsets != self._written:
                body = "".join(f"{key} {offset}\n" for key, offset in sorted(self._offsets.items()))
                write_atomically(self.path, f"{_CHECKPOINT_VERSION}\n{body}".encode())
                self._written = dict(self._offsets)
            taken_over, self._taken_over = self._taken_over, []
        for path in taken_over:
            path.unlink(missing_ok=True)


class _InCheckpoint:
    """A bucket's view of its log directory's checkpoint."""

    def __init__(self, checkpoint: AcknowledgedOffsetCheckpoint, key: str) -> None:
        self._checkpoint = checkpoint
        self._key = key

    @property
    def stored(self) -> int | None:
        return self._checkpoint.stored(self._key)

    def save(self, offset: int) -> None:
        self.note(offset)
        self._checkpoint.flush()

    def note(self, offset: int) -> None:
        self._checkpoint.record(self._key, offset)
