"""Barrier holds: what Kafka's last stable offset is to transactions, for timestamp barriers.

A tiering round cuts every bucket at a barrier B taken from the tablet servers' barrier-safe time
(GetServerTime). Appends to two tables are stamped at two moments, so a B between them would put one
in the lake's cut and not the other. A writer that must not be cut there opens a hold on every tablet
server first and gives each the same start H, at or before every stamp its writes get; closing names
R, the latest stamp any server gave under it. A hold forbids the barrier-safe time the interval
[H, R) ([H, forever) while open), so B falls before all of the hold's writes or after all of them.

The safe time is the log's, lowered out of every forbidden interval (an interval can push it into
another, so this cascades). A closed hold is forgotten once the safe time has passed R for good.
Skew between servers is covered because B is the smallest safe time of all servers: a writer's
start H is the clock of the server furthest behind, and that server remembers the hold until its
own clock has passed R. Overlapping holds chain: B waits until the chain ends, as it must.

A hold is not a transaction: what was written stays written. Holds live in memory; one a writer
does not close in time expires (logged), and a restart forgets them all. Either way the writer's
next produce or close under it raises :class:`BarrierHoldError`, so it knows its writes may be cut.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable

from lakelog.errors import BarrierHoldError, InvalidRequestError

log = logging.getLogger(__name__)

MAX_TIMEOUT_MS = 15 * 60 * 1000
MAX_ID_LENGTH = 128


@dataclass
class _Hold:
    start: int
    expires_at: int
    release_after: int | None = None

    @property
    def closing(self) -> bool:
        return self.release_after is not None


class BarrierHolds:
    """The holds of one tablet server; ``where`` names the server in errors. A hold is gone at its
    timeout even once closed, so a bad ``release_after`` cannot stop the barrier for good."""

    def __init__(self, clock: Callable[[], int], where: str) -> None:
        self._clock = clock
        self._where = where
        self._holds: dict[str, _Hold] = {}
        self._lock = threading.Lock()

    def open(self, hold_id: str, timeout_ms: int, start_ms: int = 0) -> int:
        """Open ``hold_id`` (its start is the clock now), or lower an open one's start to
        ``start_ms``. Returns the hold's start."""
        self._check_id(hold_id)
        if not 0 < timeout_ms <= MAX_TIMEOUT_MS:
            raise InvalidRequestError(f"barrier hold {hold_id}: timeout {timeout_ms} ms is not within 1 ms..{MAX_TIMEOUT_MS} ms")
        if start_ms < 0:
            raise InvalidRequestError(f"barrier hold {hold_id}: start {start_ms} is negative")
        with self._lock:
            now = self._expire()
            hold = self._holds.get(hold_id)
            if hold is None:
                hold = self._holds[hold_id] = _Hold(now, now + timeout_ms)
                log.debug("barrier hold %s opened at %d for %d ms", hold_id, now, timeout_ms)
            elif hold.closing:
                raise BarrierHoldError(f"{self._where}: barrier hold {hold_id} is closing and cannot be opened again")
            if 0 < start_ms < hold.start:
                hold.start = start_ms
            return hold.start

    def check(self, hold_id: str) -> None:
        """An append under ``hold_id`` may go ahead: the hold is open here."""
        with self._lock:
            self._expire()
            hold = self._holds.get(hold_id)
            if hold is None or hold.closing:
                raise self._not_open(hold_id)

    def close(self, hold_id: str, release_after_ms: int) -> None:
        """From now on the hold forbids only [start, ``release_after_ms``)."""
        self._check_id(hold_id)
        with self._lock:
            self._expire()
            hold = self._holds.get(hold_id)
            if hold is None:
                raise self._not_open(hold_id)
            hold.release_after = max(hold.release_after or 0, release_after_ms)
            log.debug("barrier hold %s closed: no barrier in [%d, %d)", hold_id, hold.start, hold.release_after)

    def safe_time(self, log_safe_time: int) -> int:
        """``log_safe_time`` lowered below every open hold and out of every closed hold's [H, R)."""
        with self._lock:
            self._expire()
            holds = list(self._holds.values())
            safe = min([log_safe_time, *(hold.start - 1 for hold in holds if hold.release_after is None)])
            closed = [hold for hold in holds if hold.release_after is not None]
            for hold in sorted(closed, key=lambda h: h.start, reverse=True):  # latest start first: one pass
                if hold.start <= safe < hold.release_after:
                    safe = hold.start - 1
            # wholly below a safe time that never goes back: no longer a constraint
            self._holds = {i: h for i, h in self._holds.items() if h.release_after is None or h.release_after > safe}
            return safe

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._holds)

    def _expire(self) -> int:
        """Forget holds past their timeout; returns the clock. Lock held."""
        now = self._clock()
        for hold_id, hold in list(self._holds.items()):
            if now >= hold.expires_at:
                del self._holds[hold_id]
                if not hold.closing:
                    log.warning("%s: barrier hold %s expired unclosed at its timeout; the barrier moves on", self._where, hold_id)
        return now

    def _not_open(self, hold_id: str) -> BarrierHoldError:
        return BarrierHoldError(
            f"{self._where}: barrier hold {hold_id} is not open (never opened, closed, expired, or the server "
            "restarted); a tiering barrier may fall between its writes"
        )

    @staticmethod
    def _check_id(hold_id: str) -> None:
        if not hold_id or len(hold_id) > MAX_ID_LENGTH:
            raise InvalidRequestError(f"a barrier hold id needs 1 to {MAX_ID_LENGTH} characters, got {len(hold_id)}")
