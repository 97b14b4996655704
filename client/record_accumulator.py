"""One writer's batches waiting to be sent, per bucket (:class:`TableBucket`, of any partition).

As Kafka's and Fluss's record accumulator: rows gather per bucket until sealed into a batch; the
connection's :class:`~lakelog.client.sender.Sender` asks which buckets are ready, drains them into
one request per leader, and hands each bucket's answer back to :meth:`RecordAccumulator.complete`.
An idempotent writer's bucket has up to ``client.writer.max-inflight-per-bucket`` requests in flight
(as Kafka's producer, once the bucket acknowledged one in the current epoch, so its leader knows the
writer); the leader appends them in sequence order whatever order they arrive in, and their answers
are handled here in the order they were sent. A request that failed for a retriable reason keeps
its place and is resent unchanged, alone, with the ones behind it (the idempotent writer's
sequence, :mod:`lakelog.client.delivery`); any other writer has one request in flight per bucket.
Every method is called with :attr:`RecordAccumulator.cond` held.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from lakelog.errors import LakelogError, OutOfOrderSequenceError
from lakelog.metadata import TableInfo
from lakelog.record import batch as rb
from lakelog.client.delivery import MAX_BATCHES_IN_FLIGHT, MAX_BATCHES_PER_REQUEST, BucketSequence, Delivery
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
class Flight:
    """One request of a bucket in flight: its batches, the epoch they carry, whether it was sent
    behind another (it may overtake it), and its answer once in."""

    batches: list[rb.EncodedBatch]
    epoch: int
    behind: bool
    answer: ProducedBatch | LakelogError | None = None


@dataclass
class BucketQueue:
    """One bucket's rows and batches; ``info`` is its table's, or its partition's."""

    info: TableInfo
    bucket: TableBucket
    rows: list[dict[str, Any]] = field(default_factory=list)
    first_row_at: float = 0.0
    sealed: deque[rb.EncodedBatch] = field(default_factory=deque)
    flights: deque[Flight] = field(default_factory=deque)  # in the order sent
    sequence: BucketSequence = field(default_factory=BucketSequence)
    acknowledged_epoch: int = -1  # the epoch of the last acknowledged request: its leader knows the writer
    # Failed requests waiting to be sent again exactly as they were (the server recognises each
    # whole), in sequence order.
    resend: deque[list[rb.EncodedBatch]] = field(default_factory=deque)
    # While the first of ``resend`` is being retried: tries so far, when they started, the next one.
    retries: int = 0
    failing_since: float = 0.0
    retry_at: float = 0.0
    # A request was given up on while others were in flight: the batches behind it move to a new
    # epoch once every answer is in, with the requests that came back unappended (``unsent``).
    renumber: bool = False
    unsent: list[rb.EncodedBatch] = field(default_factory=list)

    def sendable(self, max_in_flight: int) -> bool:
        """A resend goes alone once every answer ahead of it is in; sealed batches go while fewer
        than ``max_in_flight`` requests are out and the leader knows this epoch of the writer."""
        if self.renumber:
            return False
        if self.resend:
            return not self.flights
        if not self.sealed:
            return False
        if not self.flights:
            return True
        return (
            len(self.flights) < max_in_flight
            and not self.retries
            and self.acknowledged_epoch == self.sequence.epoch
            and self.batches_in_flight < MAX_BATCHES_IN_FLIGHT
        )

    @property
    def batches_in_flight(self) -> int:
        return sum(len(flight.batches) for flight in self.flights)


class RecordAccumulator:
    def __init__(
        self, delivery: Delivery, linger_s: float, hold: BarrierHold | None, reports: bool, max_in_flight: int = 1
    ) -> None:
        """``reports``: keep an :class:`AppendAck` per acknowledged request for the writer to serve;
        ``max_in_flight``: requests per bucket in flight at once (an idempotent writer's only)."""
        self.cond = threading.Condition()
        self.delivery = delivery
        self.max_in_flight = max(max_in_flight, 1) if delivery.idempotent else 1
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
        times += [q.retry_at for q in self.queues.values() if q.sendable(self.max_in_flight) and q.retry_at > now]
        return min(times, default=float("inf"))

    def ready(self, now: float) -> list[BucketQueue]:
        """Buckets with batches to send now."""
        if self.failed is not None:
            return []
        return [q for q in self.queues.values() if q.sendable(self.max_in_flight) and q.retry_at <= now]

    def drain(self, queue: BucketQueue, max_bytes: int) -> list[rb.EncodedBatch]:
        """The bucket's next request: a resend as it was, else sealed batches up to ``max_bytes``
        (one at least); in flight until its answer comes to :meth:`complete`."""
        if queue.resend:
            batches = queue.resend.popleft()
        else:
            batches, size = [], 0
            most = min(MAX_BATCHES_PER_REQUEST, MAX_BATCHES_IN_FLIGHT - queue.batches_in_flight)
            while queue.sealed and len(batches) < most and (not batches or size + len(queue.sealed[0]) <= max_bytes):
                batches.append(queue.sealed.popleft())
                size += len(batches[-1])
        queue.flights.append(Flight(batches, rb.read_header(batches[0]).writer_epoch if batches else -1, bool(queue.flights)))
        return batches

    def _flight(self, queue: BucketQueue, batches: list[rb.EncodedBatch]) -> Flight | None:
        return next((flight for flight in queue.flights if flight.batches is batches), None)

    def complete(self, queue: BucketQueue, batches: list[rb.EncodedBatch], answer: ProducedBatch | LakelogError) -> None:
        """The answer to the request of the bucket that carried ``batches``. Answers are handled in
        the order their requests were sent: acknowledged, resent in place, or given up on (``flush()``
        raises it)."""
        if self.failed is not None:
            return  # everything was failed when the connection closed
        flight = self._flight(queue, batches)
        if flight is None:
            return
        flight.answer = answer
        while queue.flights and (answer := queue.flights[0].answer) is not None:
            self._settle(queue, queue.flights.popleft(), answer)
        if queue.renumber and not queue.flights:
            queue.sealed = deque(queue.sequence.new_epoch(self.delivery.writer_id, queue.unsent + list(queue.sealed)))
            queue.unsent, queue.renumber = [], False
        self.notify()

    def _settle(self, queue: BucketQueue, flight: Flight, answer: ProducedBatch | LakelogError) -> None:
        batches = flight.batches
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
            if flight.epoch == queue.sequence.epoch:
                queue.acknowledged_epoch = flight.epoch
            self.pending -= len(batches)
            return
        overtook = flight.behind and type(answer) is OutOfOrderSequenceError  # refused, so not appended
        if queue.renumber:  # behind a request given up on
            if overtook:
                queue.unsent += batches
            else:
                self._give_up(queue, [batches], answer, 1)
        elif overtook or (flight.behind and queue.resend):  # not appended before the ones ahead: it goes again after them
            queue.resend.append(batches)
        elif not self._retry(queue, batches, answer):
            attempts, queue.retries = queue.retries + 1, 0
            behind, queue.resend = list(queue.resend), deque()
            self._give_up(queue, [batches, *behind], answer, attempts)
            if self.delivery.idempotent:
                queue.renumber = True

    def _give_up(self, queue: BucketQueue, requests: list[list[rb.EncodedBatch]], answer: LakelogError, attempts: int) -> None:
        """Fail ``requests`` of the bucket with ``answer``: ``flush()`` raises it."""
        for batches in requests:
            self.pending -= len(batches)
            error = self.delivery.gave_up(queue.info.label, queue.bucket.bucket, batches, answer, attempts)
            log.warning("produce to %s bucket %d failed: %s", queue.info.label, queue.bucket.bucket, error)
            self.error = self.error or error

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
        flight = self._flight(queue, batches)
        if flight is not None:
            queue.flights.remove(flight)
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
        queue.resend.appendleft(batches)
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
