"""How the client core's threads wake an asyncio caller: no thread of the caller's own waits.

The core's answers arrive on gRPC threads and its sender runs on the connection's thread; each
place that notifies its condition also calls its listeners. A :class:`LoopSignal` is such a
listener: it sets an :class:`asyncio.Event` on the caller's loop (thread-safe, never blocking),
and the coroutine that awaits the core's state awaits the event. A waiter clears the signal before
it looks at the state, so a notification between the look and the wait is never lost.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Callable


class LoopSignal:
    def __init__(self, loop: asyncio.AbstractEventLoop, listeners: list[Callable[[], None]], lock: threading.Condition) -> None:
        """Listens to ``listeners`` (a core object's, guarded by ``lock``) until :meth:`close`."""
        self._loop = loop
        self._event = asyncio.Event()
        self._listeners = listeners
        self._lock = lock
        with lock:
            listeners.append(self.notify)

    def close(self) -> None:
        with self._lock:
            self._listeners.remove(self.notify)

    def notify(self) -> None:
        """From any thread: wake the coroutine waiting (a loop already closed has nobody to wake)."""
        try:
            self._loop.call_soon_threadsafe(self._event.set)
        except RuntimeError:
            pass

    def clear(self) -> None:
        self._event.clear()

    async def wait(self, timeout_s: float | None) -> None:
        """Until notified, or ``timeout_s`` (None: no limit)."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout_s)
        except TimeoutError:
            pass
