"""Which tablet servers are alive: each heartbeats the coordinator, and one that has been silent
longer than ``coordinator.tablet-server.heartbeat-timeout`` is down.

Kept in memory and judged against a monotonic clock. A coordinator that starts gives every stored
server one full timeout to heartbeat before calling it down, so restarting the coordinator does not
report a healthy cluster as lost. A server going down and coming back is logged once each way,
from :meth:`TabletLiveness.check`, which the coordinator calls periodically.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Iterable

log = logging.getLogger(__name__)


class TabletLiveness:
    def __init__(self, timeout_ms: int, known: Iterable[int] = (), clock: Callable[[], float] = time.monotonic) -> None:
        self._timeout_s = timeout_ms / 1000
        self._clock = clock
        self._lock = threading.Lock()
        now = clock()
        self._last_seen: dict[int, float] = {server_id: now for server_id in known}
        self._reported_down: set[int] = set()

    def heartbeat(self, server_id: int) -> None:
        """``server_id`` registered or heartbeated just now."""
        with self._lock:
            self._last_seen[server_id] = self._clock()

    def forget(self, server_id: int) -> None:
        with self._lock:
            self._last_seen.pop(server_id, None)
            self._reported_down.discard(server_id)

    def down(self) -> set[int]:
        """The servers silent past the timeout, now."""
        with self._lock:
            return self._down(self._clock())

    def _down(self, now: float) -> set[int]:
        return {server_id for server_id, seen in self._last_seen.items() if now - seen > self._timeout_s}

    def check(self) -> set[int]:
        """Log each change since the last check (down, back) and return the servers down now."""
        with self._lock:
            now = self._clock()
            down = self._down(now)
            for server_id in sorted(down - self._reported_down):
                log.warning(
                    "tablet server %d is down: no heartbeat for %.1f s (timeout %.1f s); its buckets are unavailable",
                    server_id, now - self._last_seen[server_id], self._timeout_s,
                )
            for server_id in sorted(self._reported_down - down):
                log.info("tablet server %d is back", server_id)
            self._reported_down = down
            return set(down)

    def states(self) -> dict[int, bool]:
        """Every known server and whether it is up."""
        with self._lock:
            down = self._down(self._clock())
            return {server_id: server_id not in down for server_id in sorted(self._last_seen)}
