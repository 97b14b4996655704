"""A server-wide budget of FetchLog answer bytes in flight, so memory stays bounded whatever the
clients do (grpc holds every answer a client does not read, so unread answers alone would grow a
server without limit), shared fairly between connections.

A fetch reserves the most its answer can hold before it reads, keeps what the answer really holds,
and gives that back when its call ends: answered and sent, cancelled, or its connection gone (grpc
holds an answer's bytes until then, even when the client never reads them). So a client that never
reads holds what it was granted for as long as its connection lives: no connection may hold more
than a share of the budget (``1 / CONNECTION_SHARES``), and a reservation is at most that share (the
fetch reads no more than it reserved). Connections that never read thus leave the rest to everyone
else: six of them take at most six eighths, and a reader on another connection is served.

A fetch that does not fit waits, holding no thread, for as long as its caller waits: behind the
fetches of its own connection while that holds its share, else first come first served among the
connections under their share. Used from the RPC event loop only.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

# A connection holds at most this fraction of the budget: more than a few connections that never
# read must open before the others wait, and a scanner reading a backlog (two fetches of 8 MiB, half
# of client.scanner.fetch.max-bytes each) fits in the default's share, 32 MiB.
CONNECTION_SHARES = 8


@dataclass(eq=False)
class _Waiter:
    size: int
    connection: str
    granted: asyncio.Future[None]


class AnswerBudget:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.share = max(1, capacity // CONNECTION_SHARES)
        self.in_use = 0
        self._held: dict[str, int] = {}  # per connection, the bytes it holds
        self._waiters: deque[_Waiter] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    @property
    def connections(self) -> int:
        """Connections holding some of the budget."""
        return len(self._held)

    async def acquire(self, size: int, connection: str) -> int:
        """Reserve ``size`` bytes (at most a connection's share) for ``connection`` (its peer
        address), waiting for them; the bytes reserved."""
        size = min(size, self.share)
        if not self._waiters and self._fits(size, connection):
            self._take(size, connection)
            return size
        waiter = _Waiter(size, connection, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        self._grant()
        try:
            await waiter.granted
        except asyncio.CancelledError:
            if waiter.granted.done() and not waiter.granted.cancelled():
                self.release(size, connection)  # granted as the caller went away
            else:
                if waiter in self._waiters:  # else _grant dropped it already
                    self._waiters.remove(waiter)
                self._grant()  # the queue's head may have changed
            raise
        return size

    def release(self, size: int, connection: str) -> None:
        self.in_use -= size
        left = self._held.get(connection, 0) - size
        if left > 0:
            self._held[connection] = left
        else:
            self._held.pop(connection, None)
        self._grant()

    def _fits(self, size: int, connection: str) -> bool:
        return self.in_use + size <= self.capacity and self._under_share(size, connection)

    def _under_share(self, size: int, connection: str) -> bool:
        return self._held.get(connection, 0) + size <= self.share

    def _take(self, size: int, connection: str) -> None:
        self.in_use += size
        self._held[connection] = self._held.get(connection, 0) + size

    def _grant(self) -> None:
        """Grant waiters in order, passing over those whose connection holds its share (they wait
        for their own connection's bytes); the first other one that does not fit stops the rest, so
        a large fetch is not starved by smaller ones behind it."""
        for waiter in list(self._waiters):
            if waiter.granted.done():  # cancelled, its caller went away
                self._waiters.remove(waiter)
                continue
            if not self._under_share(waiter.size, waiter.connection):
                continue
            if self.in_use + waiter.size > self.capacity:
                return
            self._waiters.remove(waiter)
            self._take(waiter.size, waiter.connection)
            waiter.granted.set_result(None)
