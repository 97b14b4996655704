"""The connection's one sender: every writer's ready batches, one ProduceLog per leader and writer.

As Kafka's and Fluss's sender: one thread per connection, whatever its number of writers, tables and
partitions. Each turn it seals the rows that waited ``client.writer.linger`` (each writer's
:meth:`Producer.linger`), asks every writer's :class:`RecordAccumulator` which buckets are ready,
and drains them per leader into requests that carry many buckets (of any partition of a table, up to
:data:`MAX_REQUEST_BYTES`), at most ``client.writer.max-inflight`` requests in flight per tablet
server. The ready buckets are shared out over as many requests as the server has room for, so the
server appends one while the next is built and sent. Answers come back on gRPC threads and go to
each bucket's accumulator; the sender only wakes up again. Closing the connection closes the sender,
and a writer left open fails what it still holds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Protocol

from lakelog.errors import LakelogError
from lakelog.cluster_state import ServerNode
from lakelog.record import batch as rb
from lakelog.client.record_accumulator import BucketQueue, RecordAccumulator
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.messages import ProduceBucket, ProducedBatch, ProduceRequest
from lakelog.client.rpc.tablet_gateway import TabletGateway

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 8 << 20
CLOSED = "the connection is closed"


# client.writer.acks as ProduceLogRequest.acks: -1 waits for every in-sync replica, 1 for the leader,
# 0 for nothing (a batch is delivered once its request leaves; see :meth:`Sender._send`).
ACKS = {"all": -1, "1": 1, "0": 0}
ACKS_NONE = 0

class Producer(Protocol):
    """A writer as the sender sees it."""

    accumulator: RecordAccumulator

    def linger(self, now: float) -> float:
        """Seal what waited ``linger``; when something next will have (inf: nothing waits)."""


_Key = tuple[ServerNode, int, str, int]


@dataclass
class _Request:
    """One ProduceLog being built: per bucket, its accumulator, queue and batches."""

    node: ServerNode
    table_id: int
    hold_id: str
    token: bytes
    entries: list[tuple[RecordAccumulator, BucketQueue, list[rb.EncodedBatch]]] = field(default_factory=list)
    pipelined: list[bool] = field(default_factory=list)  # per entry: an earlier request of its bucket is in flight
    size: int = 0


class Sender:
    def __init__(self, tablets: TabletGateway, router: LeaderRouter, max_in_flight: int, acks: str = "all") -> None:
        """``acks`` is ``client.writer.acks``: what every request of the connection waits for."""
        self._tablets = tablets
        self._router = router
        self._max_in_flight = max(max_in_flight, 1)
        self._acks = ACKS[acks]
        self._producers: list[Producer] = []
        self._in_flight: dict[ServerNode, int] = defaultdict(int)
        self._cond = threading.Condition()
        self._woken = False
        self._closed = False
        self._thread: threading.Thread | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    def register(self, producer: Producer) -> None:
        with self._cond:
            if self._closed:
                raise LakelogError(CLOSED)
            self._producers.append(producer)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="writer-sender", daemon=True)
                self._thread.start()

    def unregister(self, producer: Producer) -> None:
        with self._cond:
            if producer in self._producers:
                self._producers.remove(producer)

    def wakeup(self) -> None:
        """Something became ready: run a turn now. Never called with an accumulator's lock held by
        the sender itself; callers may hold one (the sender takes its own lock alone)."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def close(self) -> None:
        """End the thread; every writer still registered fails what it holds."""
        with self._cond:
            self._closed = True
            producers, self._producers = self._producers, []
            thread = self._thread
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        for producer in producers:
            with producer.accumulator.cond:
                producer.accumulator.fail(LakelogError(CLOSED))

    # the thread

    def _run(self) -> None:
        next_at = float("inf")
        while True:
            with self._cond:
                if not self._woken and not self._closed:
                    self._cond.wait(None if next_at == float("inf") else max(next_at - time.monotonic(), 0))
                if self._closed:
                    return
                self._woken = False
                producers = list(self._producers)
            try:
                next_at = self._turn(producers)
            except Exception:  # noqa: BLE001 - the sender outlives one bad turn: every writer depends on it
                log.exception("the writers' sender failed a turn; it goes on")
                next_at = time.monotonic() + 0.1

    def _turn(self, producers: list[Producer]) -> float:
        """One pass over every writer: seal lingering rows, drain ready buckets, send. When the
        next pass is due without being woken."""
        now = time.monotonic()
        next_at = float("inf")
        requests: list[_Request] = []
        # A request's own fields (its table, barrier hold and writer) make its key: a request carries
        # one writer's batches, of any of the table's buckets and partitions the server leads.
        open_requests: dict[_Key, list[_Request]] = defaultdict(list)
        with self._cond:
            in_flight = dict(self._in_flight)
        for producer in producers:
            next_at = min(next_at, producer.linger(now))
            accumulator = producer.accumulator
            hold_id = accumulator.hold.hold_id if accumulator.hold is not None else ""
            with accumulator.cond:
                for queue in accumulator.ready(now):
                    try:
                        node = self._router.leader(queue.info.physical_id, queue.bucket.bucket)
                    except LakelogError as error:  # answered as the request would be: retried or given up on
                        accumulator.complete(queue, accumulator.drain(queue, MAX_REQUEST_BYTES), error)
                        continue
                    key = (node, queue.info.table_id, hold_id, accumulator.delivery.writer_id)
                    request = self._request_for(key, accumulator.delivery.token, open_requests, in_flight, requests)
                    if request is None:
                        continue  # the node's answers wake the sender when it has room
                    batches = accumulator.drain(queue, max(MAX_REQUEST_BYTES - request.size, 1))
                    request.entries.append((accumulator, queue, batches))
                    request.pipelined.append(queue.flights[-1].behind)  # the flight drain just made
                    request.size += sum(len(batch) for batch in batches)
                next_at = min(next_at, accumulator.next_deadline(now))
        for request in requests:
            self._send(request)
        return next_at

    def _request_for(
        self, key: _Key, token: bytes, open_requests: dict[_Key, list[_Request]], in_flight: dict[ServerNode, int], requests: list[_Request]
    ) -> _Request | None:
        """The request a ready bucket joins: a new one while its server has room for more in flight,
        so that requests overlap (one request carrying every bucket would leave the server nothing to
        append while the next is built); else the smallest of
        those open. None when every one is full and the server has no room."""
        node, table_id, hold_id, _ = key
        if in_flight.get(node, 0) < self._max_in_flight:
            in_flight[node] = in_flight.get(node, 0) + 1
            request = _Request(node, table_id, hold_id, token)
            open_requests[key].append(request)
            requests.append(request)
            return request
        room = [request for request in open_requests[key] if request.size < MAX_REQUEST_BYTES]
        return min(room, key=lambda request: request.size, default=None)

    def _send(self, request: _Request) -> None:
        with self._cond:
            self._in_flight[request.node] += 1
        produce = ProduceRequest(
            request.table_id,
            [
                ProduceBucket(queue.bucket.bucket, batches, queue.bucket.partition_id or 0, pipelined)
                for (_, queue, batches), pipelined in zip(request.entries, request.pipelined)
            ],
            int(self._tablets.timeout_s * 1000),
            request.hold_id,
            request.token,
            self._acks,
        )
        try:
            self._tablets.produce_log(request.node, produce, lambda answer: self._answered(request, answer))
        except LakelogError as error:  # it could not leave (the connection closed meanwhile)
            self._answered(request, error)
            return
        if self._acks == ACKS_NONE:
            # Fire and forget, as Kafka's acks=0: the batches count as delivered now. Each bucket
            # still sends its next request once this one is answered, which keeps its records in order.
            for accumulator, queue, batches in request.entries:
                with accumulator.cond:
                    accumulator.sent(queue, batches)

    def _answered(self, request: _Request, answer: list[ProducedBatch | LakelogError] | LakelogError) -> None:
        """On a gRPC thread: each bucket's answer to its accumulator, then a turn for what is ready."""
        if not isinstance(answer, LakelogError) and len(answer) != len(request.entries):
            answer = LakelogError(f"tablet server {request.node.address} answered {len(answer)} of {len(request.entries)} buckets")
        for index, (accumulator, queue, batches) in enumerate(request.entries):
            result = answer if isinstance(answer, LakelogError) else answer[index]
            with accumulator.cond:
                if self._acks == ACKS_NONE:
                    accumulator.answered_unwaited(queue, batches, result, connection_failed=isinstance(answer, LakelogError))
                else:
                    accumulator.complete(queue, batches, result)
        with self._cond:
            self._in_flight[request.node] -= 1
            self._woken = True
            self._cond.notify_all()
