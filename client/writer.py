"""The append writer: rows and Arrow batches gathered per bucket, sent as lakelog batches.

Rows of a table with bucket keys go to the bucket their key hashes to; other rows go to one bucket
until its batch is sealed, then the next (Kafka's sticky partitioner), so batches stay large
(:mod:`lakelog.client.bucket_assigner`). Each bucket has at most one produce request in flight, which keeps a bucket's records
in the order they were appended; different buckets are sent concurrently. ``flush()`` returns once
every record appended so far is acknowledged (in the default sync flush mode: on disk).

A writer is idempotent (:mod:`lakelog.client.delivery`): every batch carries the writer's id and a
sequence, so a request that failed for a retriable reason (leader moved or unreachable, timeout,
connection lost) is sent again unchanged, in order, until ``client.writer.delivery-timeout``;
the server drops what it had already appended. Only what could not be delivered reaches ``flush()``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

import pyarrow as pa

from lakelog.security.writer_tokens import WriterIdentity
from lakelog.config import Configuration
from lakelog.errors import InvalidRequestError, LakelogError, SchemaMismatchError, UnknownBucketError
from lakelog.metadata import TableInfo
from lakelog.record import batch as rb
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.messages import ProducedBatch, ProduceRequest
from lakelog.client.rpc.tablet_gateway import TabletGateway
from lakelog.client.arrow_input import arrow_table
from lakelog.client.bucket_assigner import BucketAssigner
from lakelog.client.delivery import MAX_BATCHES_PER_REQUEST, BucketSequence, Delivery, DeliveryStats

# client.writer.acks as ProduceLogRequest.acks: -1 waits for every in-sync replica.
ACKS = {"all": -1, "1": 1, "0": 0}

if TYPE_CHECKING:
    from lakelog.client.barrier_hold import BarrierHold

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 8 << 20
_CONVERSION_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError)


@dataclass(frozen=True)
class AppendAck:
    """One acknowledged produce: offsets ``[base_offset, base_offset + record_count)`` of ``bucket``,
    all stamped ``commit_timestamp``, in the order the rows were appended."""

    bucket: int
    base_offset: int
    record_count: int
    commit_timestamp: int


@dataclass
class _BucketQueue:
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


class AppendWriter:
    def __init__(
        self,
        info: TableInfo,
        tablets: TabletGateway,
        router: LeaderRouter,
        conf: Configuration,
        on_ack: Callable[[AppendAck], None] | None = None,
        hold: BarrierHold | None = None,
        identity: WriterIdentity | None = None,
    ) -> None:
        """``on_ack`` is called (on a gRPC thread) for every acknowledged produce request; with
        ``hold``, every append is made under that barrier hold. ``identity`` (a writer id and its
        token, from the coordinator) makes the writer idempotent; without one, a request lost in
        transport is not resent."""
        self._info = info
        self._on_ack = on_ack
        self._hold = hold
        self._tablets = tablets
        self._router = router
        self._writer_token = identity.token if identity else b""
        writer_id = identity.writer_id if identity else rb.NO_WRITER
        self._delivery = Delivery(info.label, info.physical_id, writer_id, router, conf.get("client.writer.delivery-timeout") / 1000)
        self._batch_bytes = conf.get("client.writer.batch-size")
        self._acks = ACKS[conf.get("client.writer.acks")]
        self._linger_s = conf.get("client.writer.linger") / 1000
        self._max_pending = max(conf.get("client.writer.max-inflight"), 1) * max(info.buckets, 1)
        self._names = set(info.schema.names)
        self._integer_columns = [f.name for f in info.schema if pa.types.is_integer(f.type)]
        self._queues = [_BucketQueue() for _ in range(info.buckets)]
        self._assigner = BucketAssigner.for_table(info)
        self._row_bytes = 64.0
        self._pending = 0
        self._error: LakelogError | None = None
        self._cond = threading.Condition()
        self._closed = False
        self._linger = threading.Thread(target=self._linger_loop, name="writer-linger", daemon=True)
        self._linger.start()

    # appending

    def append(self, row: Mapping[str, Any], bucket: int | None = None) -> None:
        """Append one row (a dict of column values); ``bucket`` pins it, else its bucket key or the
        sticky bucket chooses."""
        unknown = set(row) - self._names
        if unknown:
            raise SchemaMismatchError(f"{self._info.path} has no column(s) {sorted(unknown)}; columns are {self._info.schema.names}")
        if bucket is None and self._assigner.keyed:
            bucket = self._assigner.row_bucket(row)
        with self._cond:
            self._check_open()
            target = self._bucket(bucket)
            queue = self._queues[target]
            if not queue.rows:
                queue.first_row_at = time.monotonic()
            queue.rows.append(dict(row))
            if len(queue.rows) * self._row_bytes >= self._batch_bytes:
                self._seal_rows(target)
            self._send_ready()
        self._wait_for_room()

    def append_arrow(self, data: Any, bucket: int | None = None) -> None:
        """Append Arrow data (see :mod:`lakelog.client.arrow_input`) whose columns match the table's
        schema; with bucket keys each row goes to its key's bucket, in the order given."""
        table = arrow_table(data, self._info.schema, str(self._info.path))
        if bucket is None and self._assigner.keyed:
            for key_bucket, rows in self._assigner.split(table):
                self._append_table(rows, key_bucket)
        else:
            self._append_table(table, bucket)

    def _append_table(self, table: pa.Table, bucket: int | None) -> None:
        if table.num_rows:  # the width of these rows, not of the last ones sealed (or a guess)
            self._row_bytes = max(table.nbytes / table.num_rows, 1.0)
        for batch in table.to_batches(max_chunksize=self._chunk_rows(table.num_rows)):
            with self._cond:
                self._check_open()
                target = self._bucket(bucket)
                self._seal_rows(target)
                self._seal(self._queues[target], batch)
                self._assigner.sealed(target)
                self._send_ready()
            self._wait_for_room()

    def _chunk_rows(self, rows: int) -> int:
        """Rows per batch for ``rows`` rows: batches of about ``client.writer.batch-size``, as
        many as the rows' size rounds to, of equal rows. A table a little over the batch size (what a
        partitioned writer gathers) stays one batch, not a full one and a sliver: each is a
        produce request, and in ``sync`` flush mode an fsync."""
        per_batch = max(int(self._batch_bytes / max(self._row_bytes, 1)), 1)
        batches = max(round(rows / per_batch), 1)
        return max(-(-rows // batches), 1)

    def flush(self) -> None:
        """Send everything appended and wait until it is acknowledged; raise the first failure."""
        with self._cond:
            for bucket, queue in enumerate(self._queues):
                if queue.rows:
                    self._seal_rows(bucket)
            self._send_ready()
            while self._pending and self._error is None:
                self._cond.wait()
            self._raise_error()

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
            self._linger.join()

    @property
    def delivery_stats(self) -> DeliveryStats:
        """Requests and batches resent, and batches given up on, so far."""
        return self._delivery.stats

    def __enter__(self) -> "AppendWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # internals (called with self._cond held unless said otherwise)

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidRequestError(f"the writer of {self._info.path} is closed")
        self._raise_error()

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _bucket(self, bucket: int | None) -> int:
        if bucket is None:
            return self._assigner.current
        if not 0 <= bucket < self._info.buckets:
            raise UnknownBucketError(f"{self._info.path} has no bucket {bucket} (it has buckets 0..{self._info.buckets - 1})")
        return bucket

    def _seal_rows(self, bucket: int) -> None:
        queue = self._queues[bucket]
        if not queue.rows:
            return
        rows, queue.rows = queue.rows, []
        try:
            if any(self._loses_precision(row) for row in rows):
                raise ValueError("a float value would be truncated into an integer column")
            batch = pa.RecordBatch.from_pylist(rows, schema=self._info.schema)
        except _CONVERSION_ERRORS as exc:
            faults = [self._fault(row) for row in rows]
            if all(fault is None for fault in faults):  # each column fits alone: the rows together do not
                raise SchemaMismatchError(f"{self._info.path}: {len(rows)} row(s) do not convert: {str(exc).splitlines()[0]}") from None
            good = [row for row, fault in zip(rows, faults) if fault is None]
            first = next(fault for fault in faults if fault is not None)
            if good:
                self._seal(queue, pa.RecordBatch.from_pylist(good, schema=self._info.schema))
            raise SchemaMismatchError(
                f"{self._info.path}: {len(rows) - len(good)} row(s) do not match the table's schema, e.g. {first};"
                f" the other {len(good)} row(s) were kept"
            ) from None
        self._seal(queue, batch)
        self._assigner.sealed(bucket)

    def _loses_precision(self, row: dict[str, Any]) -> bool:
        """pyarrow casts 2.5 into an int column as 2; a log must not change what it was given."""
        return any(isinstance(row.get(name), float) for name in self._integer_columns)

    def _fault(self, row: dict[str, Any]) -> str | None:
        """Why ``row`` does not fit the schema, naming the column (None: it fits)."""
        for schema_field in self._info.schema:
            value = row.get(schema_field.name)
            if schema_field.name in self._integer_columns and isinstance(value, float):
                return f"column {schema_field.name!r} is {schema_field.type} and {value!r} is not a whole number"
            try:
                pa.array([value], type=schema_field.type)
            except _CONVERSION_ERRORS as exc:
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                return f"column {schema_field.name!r} is {schema_field.type} and {value!r} does not fit it ({reason})"
            if value is None and not schema_field.nullable:
                return f"column {schema_field.name!r} is required (not null) and the row has no value for it"
        return None

    def _seal(self, queue: _BucketQueue, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self._row_bytes = max(batch.nbytes / batch.num_rows, 1.0)
        queue.sealed.append(rb.encode_batch_buffer(batch, self._info.schema_id, writer=queue.sequence.take(self._delivery.writer_id)))
        self._pending += 1

    def _send_ready(self) -> None:
        now = time.monotonic()
        for bucket, queue in enumerate(self._queues):
            if (queue.sealed or queue.resend) and not queue.in_flight and queue.retry_at <= now:
                self._send(bucket, queue)

    def _send(self, bucket: int, queue: _BucketQueue) -> None:
        batches, queue.resend = queue.resend, []
        size = 0
        while not queue.retries and queue.sealed and len(batches) < MAX_BATCHES_PER_REQUEST and (
            not batches or size + len(queue.sealed[0]) <= MAX_REQUEST_BYTES
        ):
            batches.append(queue.sealed.popleft())
            size += len(batches[-1])
        queue.in_flight = True
        try:
            node = self._router.leader(self._info.physical_id, bucket)
        except LakelogError as error:
            self._finish(bucket, batches, error)
            return
        hold_id = self._hold.hold_id if self._hold is not None else ""
        timeout_ms = int(self._tablets.timeout_s * 1000)
        request = ProduceRequest(
            self._info.table_id, bucket, batches, timeout_ms, hold_id, self._info.partition_id or 0, self._writer_token, self._acks
        )
        self._tablets.produce_log(node, request, lambda answer: self._on_response(answer, bucket, batches))

    def _on_response(self, answer: ProducedBatch | LakelogError, bucket: int, batches: list[rb.EncodedBatch]) -> None:
        """On a gRPC thread: acknowledge, then free the bucket for its next request."""
        error = answer if isinstance(answer, LakelogError) else None
        if isinstance(answer, ProducedBatch):
            if self._hold is not None:
                self._hold.stamped(answer.commit_timestamp)
            if self._on_ack is not None:
                count = sum(rb.read_header(batch).record_count for batch in batches)
                self._on_ack(AppendAck(bucket, answer.base_offset, count, answer.commit_timestamp))
        with self._cond:
            self._finish(bucket, batches, error)

    def _finish(self, bucket: int, batches: list[rb.EncodedBatch], error: LakelogError | None) -> None:
        queue = self._queues[bucket]
        queue.in_flight = False
        if error is not None and self._retry(queue, bucket, batches, error):
            return
        if queue.retries and error is None:
            log.info("produce to %s bucket %d works again after %d retries", self._info.path, bucket, queue.retries)
        attempts, queue.retries = queue.retries + 1, 0
        self._pending -= len(batches)
        if error is not None:
            error = self._delivery.gave_up(bucket, batches, error, attempts)
            if self._delivery.idempotent:
                queue.sealed = deque(queue.sequence.new_epoch(self._delivery.writer_id, list(queue.sealed)))
            log.warning("produce to %s bucket %d failed: %s", self._info.path, bucket, error)
            self._error = self._error or error
        self._send_ready()
        self._cond.notify_all()

    def _retry(self, queue: _BucketQueue, bucket: int, batches: list[rb.EncodedBatch], error: LakelogError) -> bool:
        """Keep ``batches`` to be sent again as they are, if the delivery rules allow it."""
        now = time.monotonic()
        if not queue.retries:
            queue.failing_since = now
        delay = self._delivery.retry_delay_s(error, queue.retries, queue.failing_since, len(batches))
        if delay is None:
            return False
        if not queue.retries:
            log.info("produce to %s bucket %d failed, retrying for up to %.0f s: %s", self._info.path, bucket, self._delivery.timeout_s, error)
        queue.retries += 1
        queue.retry_at = now + delay
        queue.resend = batches
        self._cond.notify_all()
        return True

    def _wait_for_room(self) -> None:
        with self._cond:
            while self._pending >= self._max_pending and self._error is None and not self._closed:
                self._cond.wait()

    def _linger_loop(self) -> None:
        """Seals batches that waited ``linger`` and sends the retries that are due."""
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                waits = [q.retry_at - now for q in self._queues if (q.sealed or q.resend) and not q.in_flight and q.retry_at > now]
                self._cond.wait(min([self._linger_s, *waits]))
                now = time.monotonic()
                for bucket, queue in enumerate(self._queues):
                    if queue.rows and now - queue.first_row_at >= self._linger_s:
                        try:
                            self._seal_rows(bucket)
                        except SchemaMismatchError as error:
                            self._error = self._error or error
                self._send_ready()
