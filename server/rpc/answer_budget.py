"""A server-wide budget of FetchLog answer bytes in flight, so memory stays bounded whatever the
clients do (issue 15: sixty 8 MiB answers that a client never reads took a server from 188 to
1,111 MB).

A fetch reserves the most its answer can hold before it reads, keeps what the answer really holds,
and gives that back when its call ends: answered and sent, cancelled, or its connection gone (grpc
holds an answer's bytes until then, even when the client never reads them). A fetch that does not
fit waits, first come first served, holding no thread, for as long as its caller waits; one larger
than the whole budget waits for all of it. Used from the RPC event loop only.
"""

from __future__ import annotations

import asyncio
from collections import deque


class AnswerBudget:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.in_use = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def acquire(self, size: int) -> int:
        """Reserve ``size`` bytes (at most the capacity), waiting for them; the bytes reserved."""
        size = min(size, self.capacity)
        if not self._waiters and self.in_use + size <= self.capacity:
            self.in_use += size
            return size
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, granted)
        self._waiters.append(entry)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.release(size)  # granted as the caller went away
            else:
                if entry in self._waiters:  # else _grant dropped it already
                    self._waiters.remove(entry)
                self._grant()  # the queue's head may have changed
            raise
        return size

    def release(self, size: int) -> None:
        self.in_use -= size
        self._grant()

    def _grant(self) -> None:
        while self._waiters:
            size, granted = self._waiters[0]
            if not granted.done() and self.in_use + size > self.capacity:
                return
            self._waiters.popleft()
            if not granted.done():  # done: cancelled, its caller went away
                self.in_use += size
                granted.set_result(None)
