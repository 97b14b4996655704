"""How many appends may wait at once, in all of a server's buckets, for an earlier sequence of their
writer (:meth:`LogTablet.append`): each holds an RPC thread while it waits, so a writer that keeps
sending requests past gaps that never fill cannot hold them all; past the limit such a request is
refused at once, as it was before writers pipelined, and its writer resends it in order."""

from __future__ import annotations

import threading

# Well-behaved writers overtake rarely and for milliseconds; the server's RPC threads are 64 by default.
MAX_SEQUENCE_WAITS = 16


class SequenceWaits:
    def __init__(self, limit: int = MAX_SEQUENCE_WAITS) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._waiting = 0

    def enter(self) -> bool:
        """Take a place to wait; False when all are taken."""
        with self._lock:
            if self._waiting >= self._limit:
                return False
            self._waiting += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self._waiting -= 1
