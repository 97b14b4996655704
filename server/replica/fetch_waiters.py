"""Long polls parked on the RPC event loop until data arrives, without a thread each.

A FetchLog without enough bytes parks here until any bucket's high watermark moves (then it reads
again) or its wait ends. Parking costs a coroutine, not one of the RPC threads, so idle long polls
never keep produce and control RPCs waiting (issue 15). At most ``max_parked`` polls park at once:
one more is answered at once with what there is (often nothing), as if its wait had ended (the
caller counts it); the client simply polls again.

Arrivals are counted: a poll notes the count before it reads, and parks only if no arrival came
between its read and its parking, so no wake-up is lost. Producers call :meth:`notify` from their
threads; it costs one hop onto the loop, and only while polls are parked.
"""

from __future__ import annotations

import asyncio
import threading


class FetchWaiters:
    def __init__(self, max_parked: int) -> None:
        self.max_parked = max_parked
        self._lock = threading.Lock()
        self._arrivals = 0
        self._parked = 0
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None

    @property
    def parked(self) -> int:
        return self._parked

    def arrivals(self) -> int:
        """What a poll notes before it reads, for :meth:`park`."""
        with self._lock:
            return self._arrivals

    async def park(self, seen: int, timeout_s: float) -> bool:
        """Wait until data arrives after ``seen`` (see :meth:`arrivals`) or ``timeout_s`` passes;
        True after a wait (or at once when data came meanwhile or the server is closing), False at
        once when ``max_parked`` polls are parked already."""
        with self._lock:
            if self._closing or self._arrivals != seen:
                return True
            if self._parked >= self.max_parked:
                return False
            self._parked += 1
            if self._event is None:
                self._loop, self._event = asyncio.get_running_loop(), asyncio.Event()
            event = self._event
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except asyncio.TimeoutError:
            pass
        finally:
            with self._lock:
                self._parked -= 1
        return True

    def notify(self) -> None:
        """A high watermark moved (any thread): every parked poll reads again."""
        with self._lock:
            self._arrivals += 1
            loop = self._loop if self._parked else None
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake)

    def close(self) -> None:
        """The server stops: parked polls answer now, and none parks again."""
        with self._lock:
            self._closing = True
            loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        """On the loop: release every poll parked on the current event; later ones get a new one."""
        with self._lock:
            event, self._event = self._event, None
        if event is not None:
            event.set()
