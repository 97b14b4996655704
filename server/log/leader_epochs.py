"""A bucket copy's leader epochs: where in its log each leader epoch starts, checkpointed in
``<bucket dir>/leader-epoch-checkpoint`` (one ``epoch start_offset`` line each, oldest first).

A leader adds its epoch at its log end when it takes the bucket over; a follower adds the epoch its
leader names for the batches it copies. A replica that follows a new leader asks it where the
replica's own latest epoch ends in the leader's log (:meth:`LeaderEpochs.end_offset_for`) and cuts
what it holds past that: records a replaced leader appended that the new leader never had, and
only those (Kafka's KIP-101).
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from pathlib import Path

from lakelog.server.log.durable_files import write_atomically

LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
NO_EPOCH = -1


class LeaderEpochs:
    def __init__(self, directory: Path) -> None:
        self._path = directory / LEADER_EPOCH_FILE
        self._lock = threading.Lock()
        self._entries: list[tuple[int, int]] = []
        if self._path.exists():
            for line in self._path.read_text().splitlines():
                epoch, start = line.split()
                self._entries.append((int(epoch), int(start)))

    @property
    def entries(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        with self._lock:
            return self._entries[-1][0] if self._entries else NO_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Epoch ``epoch`` starts at ``start_offset``; nothing when an epoch as new is known already.
        An older epoch that started at the same offset appended nothing and is replaced."""
        with self._lock:
            if self._entries and epoch <= self._entries[-1][0]:
                return
            while self._entries and self._entries[-1][1] >= start_offset:
                self._entries.pop()
            self._entries.append((epoch, start_offset))
            self._save()

    def epoch_at(self, offset: int) -> tuple[int, int | None]:
        """The epoch the record at ``offset`` was appended in, and where the next epoch starts (None:
        it is the latest). Records before the first known epoch count as that epoch's."""
        with self._lock:
            if not self._entries:
                return NO_EPOCH, None
            index = max(bisect_right([start for _, start in self._entries], offset) - 1, 0)
            following = self._entries[index + 1][1] if index + 1 < len(self._entries) else None
            return self._entries[index][0], following

    def end_offset_for(self, epoch: int, log_end: int) -> tuple[int, int]:
        """The largest epoch at or below ``epoch`` and the offset where it ends in this log
        (``log_end`` for the latest); ``(NO_EPOCH, -1)`` when every known epoch is newer."""
        with self._lock:
            older = [i for i, (e, _) in enumerate(self._entries) if e <= epoch]
            if not older:
                return NO_EPOCH, -1
            index = older[-1]
            end = self._entries[index + 1][1] if index + 1 < len(self._entries) else log_end
            return self._entries[index][0], end

    def truncate_from_end(self, end_offset: int) -> None:
        """The log now ends at ``end_offset``: epochs that start there or later go."""
        with self._lock:
            kept = [entry for entry in self._entries if entry[1] < end_offset]
            if kept != self._entries:
                self._entries = kept
                self._save()

    def clear(self) -> None:
        with self._lock:
            self._entries = []
            self._save()

    def _save(self) -> None:
        write_atomically(self._path, "".join(f"{epoch} {start}\n" for epoch, start in self._entries).encode())
