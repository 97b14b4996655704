"""One writer's batches waiting to be sent, per bucket (:class:`TableBucket`, of any partition).

As Kafka's and Fluss's record accumulator: rows gather per bucket until sealed into a batch; the
connection's :class:`~lakelog.client.sender.Sender` asks which buckets are ready, drains them into
one request per leader, and hands each bucket's answer back to :meth:`RecordAccumulator.complete`.
A bucket has at most one request in flight, which keeps its records in the order they were
appended; a request that failed for a retriable reason keeps its place and is resent unchanged
(the idempotent writer's sequence, :mod:`lakelog.client.delivery`). Every method is called with
:attr:`RecordAccumulator.cond` held.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from lakelog.errors import LakelogError
from lakelog.metadata import TableInfo
from lakelog.record import batch as rb
from lakelog.client.delivery import MAX_BATCHES_PER_REQUEST, BucketSequence, Delivery
from lakelog.client.rpc.messages import ProducedBatch
from lakelog.client.table_bucket import TableBucket

if TYPE_CHECKING:
    from lakelog.client.barrier_hold import BarrierHold

log = logging.getLogger(__name__)

UNKNOWN = -1  # an acks=0 report's offset and commit timestamp


@dataclass(frozen=True)
class AppendAck:
    """One acknowledged produce: offsets ``[base_offset, base_offset + record_count)`` of ``bucket``
    (of partition ``partition_id``, for a partitioned table), all stamped ``commit_timestamp``, in
    the order the rows were appended. With ``client.writer.acks=0`` the report comes once the
    request is sent, and ``base_offset`` and ``commit_timestamp`` are -1 (unknown), as in Kafka."""

    bucket: int
    base_offset: int
    record_count: int
    commit_timestamp: int
    partition_id: int | None = None


@dataclass
class BucketQueue:
    """One bucket's rows and batches; ``info`` is its table's, or its partition's."""

    info: TableInfo
    bucket: TableBucket
    rows: list[dict[str, Any]] = field(default_factory=list)
    first_row_at: float = 0.0
    sealed: deque[rb.EncodedBatch] = field(default_factory=deque)
    in_flight: bool = False
    sequence: BucketSequence = field(default_factory=BucketSequence)
    # A failed request waiting to be sent again exactly as it was (the server recognises it whole).
    resend: list[rb.EncodedBatch] = field(default_factory=list)
    # While ``resend`` is being retried: tries so far, when they started, the next one.
    retries: int = 0
    failing_since: float = 0.0
    retry_at: float = 0.0

    @property
    def sendable(self) -> bool:
        return bool(self.sealed or self.resend) and not self.in_flight


class RecordAccumulator:
    def __init__(self, delivery: Delivery, linger_s: float, hold: BarrierHold | None, reports: bool) -> None:
        """``reports``: keep an :class:`AppendAck` per acknowledged request for the writer to serve."""
        self.cond = threading.Condition()
        self.delivery = delivery
        self.hold = hold
        self.linger_s = linger_s
        self.queues: dict[TableBucket, BucketQueue] = {}
        self.pending = 0  # batches sealed and not yet acknowledged or given up on
        self.error: LakelogError | None = None
        self.acks: deque[AppendAck] = deque()
        self.failed: LakelogError | None = None  # the connection closed: nothing more is sent
        # Called (any thread, lock held; must not block) whenever batches are acknowledged or
        # failed: how an asyncio writer learns it without a thread of its own.
        self.listeners: list[Callable[[], None]] = []
        self._reports = reports

    def queue(self, info: TableInfo, bucket: int) -> BucketQueue:
        key = TableBucket(info.table_id, info.partition_id, bucket)
        queue = self.queues.get(key)
        if queue is None:
            queue = self.queues[key] = BucketQueue(info, key)
        return queue

    def take(self, queue: BucketQueue) -> tuple[int, int, int]:
        """The (writer id, epoch, sequence) of the bucket's next batch, to encode it with while the
        lock is free (the sender drains and answers land meanwhile); :meth:`add` queues it."""
        return queue.sequence.take(self.delivery.writer_id)

    def add(self, queue: BucketQueue, encoded: rb.EncodedBatch, writer: tuple[int, int, int]) -> None:
        """Queue ``encoded``, stamped ``writer`` by :meth:`take`: the bucket's next batch. Restamped
        when the bucket moved to a new epoch while it was encoded (a batch before it was given up)."""
        if queue.sequence.epoch != writer[1]:
            encoded = rb.restamp_writer(encoded, *self.take(queue))
        queue.sealed.append(encoded)
        self.pending += 1

    def lingering(self, now: float) -> list[BucketQueue]:
        """Buckets whose rows waited ``linger``: to be sealed."""
        return [q for q in self.queues.values() if q.rows and now - q.first_row_at >= self.linger_s]

    def next_deadline(self, now: float) -> float:
        """When rows next finish lingering or a retry is due (inf: nothing waits on time)."""
        times = [q.first_row_at + self.linger_s for q in self.queues.values() if q.rows]
        times += [q.retry_at for q in self.queues.values() if q.sendable and q.retry_at > now]
        return min(times, default=float("inf"))

    def ready(self, now: float) -> list[BucketQueue]:
        """Buckets with batches to send now."""
        if self.failed is not None:
            return []
        return [q for q in self.queues.values() if q.sendable and q.retry_at <= now]

    def drain(self, queue: BucketQueue, max_bytes: int) -> list[rb.EncodedBatch]:
        """The bucket's next request: a resend as it was, else sealed batches up to ``max_bytes``
        (one at least); the bucket is in flight until :meth:`complete`."""
        batches, queue.resend = queue.resend, []
        size = sum(len(batch) for batch in batches)
        while not queue.retries and queue.sealed and len(batches) < MAX_BATCHES_PER_REQUEST and (
            not batches or size + len(queue.sealed[0]) <= max_bytes
        ):
            batches.append(queue.sealed.popleft())
            size += len(batches[-1])
        queue.in_flight = True
        return batches

    def complete(self, queue: BucketQueue, batches: list[rb.EncodedBatch], answer: ProducedBatch | LakelogError) -> None:
        """The bucket's answer: acknowledged, retried in place, or given up on (``flush()`` raises it)."""
        if self.failed is not None:
            return  # everything was failed when the connection closed
        queue.in_flight = False
        bucket = queue.bucket.bucket
        if isinstance(answer, ProducedBatch):
            if self.hold is not None:
                self.hold.stamped(answer.commit_timestamp)
            if self._reports:
                count = sum(rb.read_header(batch).record_count for batch in batches)
                self.acks.append(AppendAck(bucket, answer.base_offset, count, answer.commit_timestamp, queue.bucket.partition_id))
            if queue.retries:
                log.info("produce to %s bucket %d works again after %d retries", queue.info.label, bucket, queue.retries)
            queue.retries = 0
            self.pending -= len(batches)
        elif not self._retry(queue, batches, answer):
            attempts, queue.retries = queue.retries + 1, 0
            self.pending -= len(batches)
            error = self.delivery.gave_up(queue.info.label, bucket, batches, answer, attempts)
            if self.delivery.idempotent:
                queue.sealed = deque(queue.sequence.new_epoch(self.delivery.writer_id, list(queue.sealed)))
            log.warning("produce to %s bucket %d failed: %s", queue.info.label, bucket, error)
            self.error = self.error or error
        self.notify()

    def sent(self, queue: BucketQueue, batches: list[rb.EncodedBatch]) -> None:
        """With ``acks=0``: the request carrying ``batches`` left, which is their delivery. Their
        report (if any) has offset and commit timestamp -1: nobody waits to learn them."""
        if self.failed is not None:
            return
        if self._reports:
            count = sum(rb.read_header(batch).record_count for batch in batches)
            self.acks.append(AppendAck(queue.bucket.bucket, UNKNOWN, count, UNKNOWN, queue.bucket.partition_id))
        self.pending -= len(batches)
        self.notify()

    def answered_unwaited(
        self, queue: BucketQueue, batches: list[rb.EncodedBatch], answer: ProducedBatch | LakelogError, connection_failed: bool
    ) -> None:
        """With ``acks=0``, the answer nobody waited for: the bucket may send again. Nothing is
        resent. A refused bucket is logged and counted (``delivery_stats.failed_batches``) and its
        leaders reloaded if they moved; a request the connection lost (the server unreachable, a
        timeout) is the writer's error, raised by its next ``flush()``."""
        if self.failed is not None:
            return
        queue.in_flight = False
        if isinstance(answer, LakelogError):
            self.delivery.dropped(queue.info.physical_id, batches, answer)
            log.warning("produce (acks=0) to %s bucket %d failed: %s", queue.info.label, queue.bucket.bucket, answer)
            if connection_failed:
                self.error = self.error or answer
        self.notify()

    def _retry(self, queue: BucketQueue, batches: list[rb.EncodedBatch], error: LakelogError) -> bool:
        """Keep ``batches`` to be sent again as they are, if the delivery rules allow it."""
        now = time.monotonic()
        if not queue.retries:
            queue.failing_since = now
        delay = self.delivery.retry_delay_s(error, queue.retries, queue.failing_since, len(batches), queue.info.physical_id)
        if delay is None:
            return False
        if not queue.retries:
            log.info(
                "produce to %s bucket %d failed, retrying for up to %.0f s: %s",
                queue.info.label, queue.bucket.bucket, self.delivery.timeout_s, error,
            )
        queue.retries += 1
        queue.retry_at = now + delay
        queue.resend = batches
        return True

    def fail(self, error: LakelogError) -> None:
        """Nothing can be sent any more (the connection closed): every batch held fails with ``error``."""
        if self.failed is not None:
            return
        self.failed = error
        if self.pending:
            log.warning("%d batch(es) of a writer not yet acknowledged fail: %s", self.pending, error)
        self.queues.clear()
        self.pending = 0
        self.error = self.error or error
        self.notify()

    def notify(self) -> None:
        self.cond.notify_all()
        for listener in self.listeners:
            listener()
