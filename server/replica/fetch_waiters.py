"""Long polls parked on the RPC event loop until data arrives, without a thread each.

A FetchLog without enough bytes parks here until one of *its* buckets' high watermark moves (then
it reads again) or its wait ends. Parking costs a coroutine, not one of the RPC threads, so idle long
polls never keep produce and control RPCs waiting; and a produce wakes only the polls on
its bucket, so a thousand polls parked on quiet buckets cost nothing while one bucket is busy. At
most ``max_parked`` polls park at once: one more is answered at once with what there is (often
nothing), as if its wait had ended (the caller counts it); the client simply polls again.

Arrivals are numbered: a poll notes the number before it reads, and parks only if none of its
buckets had an arrival since, so no wake-up is lost between its read and its parking. Producers
call :meth:`notify` from their threads; it costs one hop onto the loop, and only while a poll is
parked on that bucket. A follower's fetch over the replica stream parks the same way in its own
thread (:meth:`park_thread`), woken directly.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Collection

BucketKey = tuple[int, int]
"""(physical table id, bucket): a partition's buckets are keyed by the partition's id."""


Waiter = asyncio.Event | threading.Event
"""A parked poll: an asyncio event for a poll on the RPC loop, a thread's event for a replica
stream's fetch (:mod:`lakelog.server.rpc.replica_stream_server`), which waits in its own thread."""


class FetchWaiters:
    def __init__(self, max_parked: int) -> None:
        self.max_parked = max_parked
        self._lock = threading.Lock()
        self._arrivals = 0
        self._last_arrival: dict[BucketKey, int] = {}
        self._parked: dict[BucketKey, set[Waiter]] = {}
        self._parked_count = 0
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def parked(self) -> int:
        return self._parked_count

    def arrivals(self) -> int:
        """What a poll notes before it reads, for :meth:`park`."""
        with self._lock:
            return self._arrivals

    async def park(self, keys: Collection[BucketKey], seen: int, timeout_s: float) -> bool:
        """Wait until data arrives on one of ``keys`` after ``seen`` (see :meth:`arrivals`) or
        ``timeout_s`` passes; True after a wait (or at once when data came meanwhile or the server
        is closing), False at once when ``max_parked`` polls are parked already."""
        event = asyncio.Event()
        with self._lock:
            self._loop = asyncio.get_running_loop()
        parked = self._add(event, keys, seen)
        if parked is not None:
            return parked
        try:
            await asyncio.wait_for(event.wait(), max(timeout_s, 0))
        except asyncio.TimeoutError:
            pass
        finally:
            self._remove(event, keys)
        return True

    def park_thread(self, keys: Collection[BucketKey], seen: int, timeout_s: float) -> bool:
        """:meth:`park` for a caller that waits in a thread of its own."""
        event = threading.Event()
        parked = self._add(event, keys, seen)
        if parked is not None:
            return parked
        try:
            event.wait(max(timeout_s, 0))
        finally:
            self._remove(event, keys)
        return True

    def _add(self, waiter: Waiter, keys: Collection[BucketKey], seen: int) -> bool | None:
        """None once ``waiter`` is parked on ``keys``; else what :meth:`park` answers at once."""
        with self._lock:
            if self._closing or any(self._last_arrival.get(key, 0) > seen for key in keys):
                return True
            if self._parked_count >= self.max_parked:
                return False
            self._parked_count += 1
            for key in keys:
                self._parked.setdefault(key, set()).add(waiter)
        return None

    def _remove(self, waiter: Waiter, keys: Collection[BucketKey]) -> None:
        with self._lock:
            self._parked_count -= 1
            for key in keys:
                waiters = self._parked.get(key)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del self._parked[key]

    def notify(self, key: BucketKey) -> None:
        """The high watermark of ``key`` moved (any thread): the polls parked on it read again."""
        with self._lock:
            self._arrivals += 1
            self._last_arrival[key] = self._arrivals
            parked = self._parked.get(key)
            if not parked:
                return  # a produce with no poll parked on its bucket: nothing more on its path
            waiters = list(parked)
            loop = self._loop
        self._wake(waiters, loop)

    def forget(self, table_id: int) -> None:
        """A table or partition was dropped here: its buckets' arrivals are not kept any more."""
        with self._lock:
            for key in [key for key in self._last_arrival if key[0] == table_id]:
                del self._last_arrival[key]

    def close(self) -> None:
        """The server stops: parked polls answer now, and none parks again."""
        with self._lock:
            self._closing = True
            waiters = [waiter for parked in self._parked.values() for waiter in parked]
            loop = self._loop
        self._wake(waiters, loop)

    @staticmethod
    def _wake(waiters: list[Waiter], loop: asyncio.AbstractEventLoop | None) -> None:
        """A thread's event is set here; the loop's are set on the loop, in one hop for all."""
        on_loop = [waiter for waiter in waiters if isinstance(waiter, asyncio.Event)]
        for waiter in waiters:
            if isinstance(waiter, threading.Event):
                waiter.set()
        if on_loop and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(_set_all, on_loop)


def _set_all(events: list[asyncio.Event]) -> None:
    for event in events:
        event.set()
