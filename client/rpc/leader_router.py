"""Which tablet server leads a bucket, and the client's one retry loop.

Every caller that reaches a bucket goes through here: admin lookups, barrier holds and the tiering
job's calls block in :meth:`LeaderRouter.call`; the writer and the fetcher, which keep requests in
flight, ask :meth:`retry_delay_s` whether and when to resend, which has the leader map reloaded
without blocking the gRPC thread that saw the failure. A failure that may mean
a bucket moved (not leader, no known leader, unreachable server) reloads the leaders before the
next try; the wait between tries comes from the :class:`RetryPolicy`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

from lakelog.errors import LakelogError, UnknownBucketError
from lakelog.cluster_state import ServerNode
from lakelog.metadata import MAX_BUCKETS, TableInfo
from lakelog.client.metadata_cache import MetadataCache
from lakelog.client.rpc.retry_policy import RetryPolicy

log = logging.getLogger(__name__)

T = TypeVar("T")


class LeaderRouter:
    def __init__(self, metadata: MetadataCache, policy: RetryPolicy, timeout_s: float) -> None:
        """``timeout_s``: how long :meth:`call` keeps trying (``client.request-timeout``)."""
        self.metadata = metadata
        self.policy = policy
        self.timeout_s = timeout_s
        self._refreshing: set[int] = set()
        self._refreshed_at: dict[int, float] = {}
        self._lock = threading.Lock()

    def leader(self, table_id: int, bucket: int) -> ServerNode:
        return self.metadata.leader(table_id, bucket)

    def by_leader(self, info: TableInfo, buckets: Iterable[int] | None) -> dict[ServerNode, list[int]]:
        """``buckets`` (None: all) grouped by the server that leads them."""
        groups: dict[ServerNode, list[int]] = defaultdict(list)
        for bucket in range(info.buckets) if buckets is None else buckets:
            if not 0 <= bucket < info.buckets:
                raise UnknownBucketError(f"{info.label} has no bucket {bucket} (it has buckets 0..{info.buckets - 1})")
            groups[self.metadata.leader(info.physical_id, bucket)].append(bucket)
        return groups

    def call(self, action: Callable[[], T], what: str, resend_safe: bool, tables: Sequence[int] = ()) -> T:
        """``action()``, tried again while the policy allows and time is left. ``tables``: ids of
        the tables whose leaders ``action`` looks up, reloaded after a failure that may mean a move."""
        deadline = time.monotonic() + self.timeout_s
        attempt = 0
        while True:
            try:
                return action()
            except LakelogError as error:
                delay = self.policy.delay_s(attempt)
                if not self.policy.should_retry(error, resend_safe) or time.monotonic() + delay > deadline:
                    raise
                log.debug("%s failed (%s); retry %d in %.2f s", what, error, attempt + 1, delay)
                time.sleep(delay)
                attempt += 1
                if self.policy.needs_metadata(error):
                    for table_id in tables:
                        self._refresh(table_id)

    def call_leaders(
        self,
        infos: Sequence[TableInfo],
        buckets: Iterable[int] | None,
        send: Callable[[ServerNode, list[tuple[TableInfo, list[int]]]], list[T]],
        what: str,
    ) -> list[T]:
        """``buckets`` (None: all) of each of ``infos`` (a table, or partitions of one table) asked
        of their leaders: one ``send`` per leader for every info it leads buckets of, each naming at
        most ``MAX_BUCKETS`` buckets; answers concatenated, retried as a whole (these are lookups,
        safe to resend)."""
        wanted = None if buckets is None else list(buckets)

        def attempt() -> list[T]:
            by_node: dict[ServerNode, list[tuple[TableInfo, list[int]]]] = defaultdict(list)
            for info in infos:
                for node, group in self.by_leader(info, wanted).items():
                    by_node[node].append((info, group))
            return [answer for node, groups in by_node.items() for chunk in _within_limit(groups) for answer in send(node, chunk)]

        label = infos[0].label if len(infos) == 1 else f"{len(infos)} partitions of {infos[0].path}"
        return self.call(attempt, f"{what} of {label}", resend_safe=True, tables=[info.physical_id for info in infos])

    def retry_delay_s(self, error: LakelogError, attempt: int, resend_safe: bool, table_id: int) -> float | None:
        """For a caller with requests in flight: the wait before resending after ``error`` (None:
        do not resend). Reloads the table's leaders meanwhile when the error calls for it."""
        if not self.policy.should_retry(error, resend_safe):
            return None
        self.refresh_if_moved(error, table_id)
        return self.policy.delay_s(attempt)

    def refresh_if_moved(self, error: LakelogError, table_id: int) -> None:
        """Reload the table's leaders (in the background) when ``error`` may mean a bucket moved."""
        if self.policy.needs_metadata(error):
            self._refresh_later(table_id)

    def _refresh_later(self, table_id: int) -> None:
        """Reload the table's leaders on a thread of its own, at most one at a time per table and
        not more often than the policy's first backoff: many buckets failing together cost one reload."""
        with self._lock:
            recent = time.monotonic() - self._refreshed_at.get(table_id, float("-inf")) < self.policy.backoff_s
            if table_id in self._refreshing or recent:
                return
            self._refreshing.add(table_id)
        threading.Thread(target=self._refresh_in_background, args=(table_id,), name="metadata-refresh", daemon=True).start()

    def _refresh_in_background(self, table_id: int) -> None:
        try:
            self._refresh(table_id)
        finally:
            with self._lock:
                self._refreshing.discard(table_id)

    def _refresh(self, table_id: int) -> None:
        """A failed reload is not the caller's error: the next try fails again, or finds the old leader back."""
        try:
            self.metadata.refresh(table_id)
        except LakelogError as error:
            log.debug("metadata refresh of table id %d failed: %s", table_id, error)
        with self._lock:
            self._refreshed_at[table_id] = time.monotonic()


def _within_limit(groups: list[tuple[TableInfo, list[int]]]) -> Iterator[list[tuple[TableInfo, list[int]]]]:
    """``groups`` in runs of at most ``MAX_BUCKETS`` buckets: what a server takes in one request
    (one group never has more, a table having at most that many buckets)."""
    run: list[tuple[TableInfo, list[int]]] = []
    size = 0
    for info, group in groups:
        if run and size + len(group) > MAX_BUCKETS:
            yield run
            run, size = [], 0
        run.append((info, group))
        size += len(group)
    if run:
        yield run
