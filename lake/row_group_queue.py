"""Row groups decoded on a pool, handed back in the order they were submitted.

Both Iceberg LogSources decode several row groups at once (Parquet decoding releases the GIL) but
must yield rows in file order, and must not run ahead of their consumer by more than the pool can
use: a bounded queue of futures, not the snapshot.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future
from typing import Iterator

import pyarrow as pa


class RowGroupQueue:
    """At most ``depth`` row groups being decoded; each one's batches come back in submission order."""

    def __init__(self, depth: int) -> None:
        self._depth = max(depth, 1)
        self._pending: deque[Future[list[pa.RecordBatch]]] = deque()

    def push(self, decoding: Future[list[pa.RecordBatch]]) -> Iterator[pa.RecordBatch]:
        """Queue ``decoding``; yields the batches of the oldest row groups while the queue is full."""
        self._pending.append(decoding)
        while len(self._pending) >= self._depth:
            yield from self._pending.popleft().result()

    def drain(self) -> Iterator[pa.RecordBatch]:
        """The batches of every queued row group."""
        while self._pending:
            yield from self._pending.popleft().result()

    def cancel(self) -> None:
        """Drop what was not started (a read closed or failed early)."""
        for decoding in self._pending:
            decoding.cancel()
        self._pending.clear()
