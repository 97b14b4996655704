"""A scanner's fetch state under one lock: positions, completed fetches, tier readers.

As Fluss's ``LogFetchBuffer`` (with its ``LogScannerStatus``): per subscribed bucket
(:class:`TableBucket`, of any partition) its position, the answers of the tablet servers not yet
polled, in offset order, and the reader of a tier the client reads itself (remote segments, the
lake), which a bucket reads from before it is fetched again, so a bucket's records come in order
whichever tier holds them. The :class:`~lakelog.client.scanner.log_fetcher.LogFetcher` fills it,
the :class:`~lakelog.client.scanner.fetch_collector.FetchCollector` empties it; a poll waits on its
condition, which every answer and every reader's batch notifies. Attributes are read and written
with :attr:`FetchBuffer.cond` held.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Protocol

import pyarrow as pa

from lakelog.errors import LakelogError
from lakelog.client.rpc.messages import FetchedBucket
from lakelog.client.scanner.read_ahead_budget import ReadAheadBudget
from lakelog.client.table_bucket import TableBucket

LOCAL_TIER = "local"
REMOTE_TIER = "remote"
LAKE_TIER = "lake"
# How long polls wait for a server's first fetches (FetchBuffer.opening): they answer at once
# (max-wait 0), so this bounds only what a server that never answers holds back.
OPENING_WAIT_S = 1.0


class TierReader(Protocol):
    """A bucket's read from a tier the client reads itself (remote segments, the lake)."""

    tier: str
    next_offset: int
    high_watermark: int

    @property
    def done(self) -> bool: ...

    def ready(self) -> bool: ...

    def read(self, max_bytes: int, max_records: int | None = None) -> pa.Table: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class LakeOnlyRange:
    """A bucket of a partition only the lake holds: read from the lake up to ``end``, never fetched."""

    end: int
    snapshot_id: int


class FetchBuffer:
    def __init__(self, budget: ReadAheadBudget) -> None:
        self.cond = threading.Condition()
        self.budget = budget
        self.positions: dict[TableBucket, int] = {}
        self.records_by_tier: dict[str, int] = {LAKE_TIER: 0, REMOTE_TIER: 0, LOCAL_TIER: 0}
        # Answers not yet polled, per bucket in offset order, and where the bucket's next fetch starts.
        self.completed: dict[TableBucket, list[FetchedBucket]] = {}
        self.next_fetch: dict[TableBucket, int] = {}
        self.in_flight: set[TableBucket] = set()
        # A server's first fetches still in flight (split in two, see the fetcher) and until when
        # polls wait for them: a small table's first poll holds every bucket, as one fetch's answer
        # did, and a server that never answers holds the others' records back only that long.
        self.opening = 0
        self.opening_until = 0.0
        # Buckets whose answers a poll has taken out of ``completed`` and is acting on, the last of
        # them a pointer to another tier or an error: none is fetched again meanwhile (a fetch sent
        # in that window would come back with the same pointer and start a second reader).
        self.taking: set[TableBucket] = set()
        self.retry_at: dict[TableBucket, float] = {}
        self.retries: dict[TableBucket, int] = {}
        self.readers: dict[TableBucket, TierReader] = {}
        self.lake_only: dict[TableBucket, LakeOnlyRange] = {}
        # Lake-only buckets whose reader counts in the budget's window of open readers.
        self.windowed: set[TableBucket] = set()
        # Partitions whose buckets the servers answered as gone, with that answer, for the scanner.
        self.gone: dict[int, LakelogError] = {}
        # Called (any thread, lock held; must not block) whenever something arrives: how an
        # asyncio scanner learns it without a thread of its own.
        self.listeners: list[Callable[[], None]] = []

    def seek(self, bucket: TableBucket, offset: int, lake_only: LakeOnlyRange | None = None) -> TierReader | None:
        """The bucket reads from ``offset`` on; the reader it had, to be closed outside the lock."""
        self.positions[bucket] = offset
        if lake_only is None:
            self.lake_only.pop(bucket, None)
        else:
            self.lake_only[bucket] = lake_only
        self.drop_completed(bucket)
        return self.pop_reader(bucket)

    def unsubscribe(self, bucket: TableBucket) -> TierReader | None:
        self.positions.pop(bucket, None)
        self.lake_only.pop(bucket, None)
        self.drop_completed(bucket)
        return self.pop_reader(bucket)

    def drop_completed(self, bucket: TableBucket) -> None:
        """Forget the bucket's buffered answers: its next fetch starts at its position again."""
        for fetch in self.completed.pop(bucket, ()):
            self.budget.release(len(fetch.records))
        self.next_fetch.pop(bucket, None)

    def pop_reader(self, bucket: TableBucket) -> TierReader | None:
        reader = self.readers.pop(bucket, None)
        if bucket in self.windowed:
            self.windowed.discard(bucket)
            self.budget.reader_closed()
        return reader

    def reads_on(self, bucket: TableBucket) -> bool:
        """The bucket may be fetched now: nothing buffered, or answers that end where the next
        fetch starts (records, or none); an error or a pointer to another tier is polled first."""
        answers = self.completed.get(bucket)
        return not answers or plain(answers[-1])

    def has_data(self) -> bool:
        """Something a poll may take (nothing while :meth:`holding`)."""
        return not self.holding() and (bool(self.completed) or any(reader.ready() for reader in self.readers.values()))

    def holding(self) -> bool:
        """Polls wait for a server's first fetches still in flight."""
        return self.opening > 0 and time.monotonic() < self.opening_until

    def wait(self, timeout_s: float) -> None:
        """Until an answer or a reader's batch arrives, or ``timeout_s``."""
        with self.cond:
            if not self.has_data():
                self.cond.wait(timeout_s)

    def wakeup(self) -> None:
        with self.cond:
            self.notify()

    def notify(self) -> None:
        """Something arrived (called with :attr:`cond` held)."""
        self.cond.notify_all()
        for listener in self.listeners:
            listener()


def plain(fetch: FetchedBucket) -> bool:
    """An answer of records (or none) from the log, nothing to act on before fetching on."""
    return fetch.error is None and fetch.remote is None and fetch.lake is None
