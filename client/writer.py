"""The append writer: rows and Arrow batches gathered per bucket, sent as lakelog batches.

Rows of a table with bucket keys go to the bucket their key hashes to; other rows go to one bucket
until its batch is sealed, then the next (Kafka's sticky partitioner), so batches stay large
(:mod:`lakelog.client.bucket_assigner`). The writer's batches wait in its
:class:`~lakelog.client.record_accumulator.RecordAccumulator`, and the connection's one
:class:`~lakelog.client.sender.Sender` sends them: a writer has no thread of its own, whatever the
number of buckets or partitions it writes. Each bucket has at most one produce request in flight,
which keeps a bucket's records in the order they were appended. ``flush()`` returns once every
record appended so far is acknowledged (in the default sync flush mode: on disk).

A writer is idempotent (:mod:`lakelog.client.delivery`): every batch carries the writer's id and a
sequence, so a request that failed for a retriable reason (leader moved or unreachable, timeout,
connection lost) is sent again unchanged, in order, until ``client.writer.delivery-timeout``;
the server drops what it had already appended. Only what could not be delivered reaches ``flush()``.

Delivery reports (``on_ack``) are the application's: they are served on the application's own
calls (``append*()`` and ``flush()``), never on a gRPC thread, as confluent-kafka serves them from
``poll()`` and ``flush()``. ``flush()`` returns after every acknowledged append's report was served;
a report that raises is logged at once, the reports after it are still served, and ``flush()``
raises the first such exception. A writer left open when its connection closes fails what it still
holds (``flush()`` raises).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping

import pyarrow as pa

from lakelog.security.writer_tokens import WriterIdentity
from lakelog.config import Configuration
from lakelog.errors import InvalidRequestError, LakelogError, SchemaMismatchError, UnknownBucketError
from lakelog.metadata import TableInfo
from lakelog.record import batch as rb
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.arrow_input import arrow_table
from lakelog.client.bucket_assigner import BucketAssigner
from lakelog.client.delivery import Delivery, DeliveryStats
from lakelog.client.record_accumulator import AppendAck, BucketQueue, RecordAccumulator
from lakelog.client.sender import Sender

if TYPE_CHECKING:
    from lakelog.client.barrier_hold import BarrierHold

log = logging.getLogger(__name__)

_CONVERSION_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError)


class AppendWriter:
    def __init__(
        self,
        info: TableInfo,
        sender: Sender,
        router: LeaderRouter,
        conf: Configuration,
        on_ack: Callable[[AppendAck], None] | None = None,
        hold: BarrierHold | None = None,
        identity: WriterIdentity | None = None,
        linger_first: Callable[[float], float] | None = None,
        blocking: bool = True,
    ) -> None:
        """``on_ack`` is called (on the application's next ``append*()`` or ``flush()``) for every
        acknowledged produce request; with ``hold``, every append is made under that barrier hold.
        ``identity`` (a writer id and its token, from the coordinator) makes the writer idempotent;
        without one, a request lost in transport is not resent. ``linger_first(now)``: what a
        partitioned writer sends before lingering rows are sealed (see :meth:`linger`). Not
        ``blocking`` (an asyncio writer): appends never wait for room, the caller awaits
        :meth:`has_room` itself."""
        self._info = info
        self._on_ack = on_ack
        self._sender = sender
        delivery = Delivery(identity, router, conf.get("client.writer.delivery-timeout") / 1000)
        pipelined = conf.get("client.writer.max-inflight-per-bucket") if conf.get("client.writer.acks") != "0" else 1
        self.accumulator = RecordAccumulator(delivery, conf.get("client.writer.linger") / 1000, hold, on_ack is not None, pipelined)
        self._cond = self.accumulator.cond
        self._batch_bytes = conf.get("client.writer.batch-size")
        self._inflight = max(conf.get("client.writer.max-inflight"), 1)
        self._names = set(info.schema.names)
        self._integer_columns = [f.name for f in info.schema if pa.types.is_integer(f.type)]
        self._assigners: dict[int | None, BucketAssigner] = {}  # per partition: each sticks to a bucket of its own
        self._row_bytes = 64.0
        self._ack_error: Exception | None = None
        self._serving = threading.Lock()  # one thread serves reports at a time, so they stay in order
        # One seal at a time, taken before the lock: a batch is encoded outside the lock (the
        # sender drains and answers land meanwhile), and each bucket's batches still queue in the
        # order of their sequence numbers.
        self._sealing = threading.Lock()
        self._closed = False
        self._linger_first = linger_first
        self._blocking = blocking
        sender.register(self)

    # appending

    def append(self, row: Mapping[str, Any], bucket: int | None = None) -> None:
        """Append one row (a dict of column values); ``bucket`` pins it, else its bucket key or the
        sticky bucket chooses."""
        self.append_row_to(self._info, row, bucket)
        self.serve_acks()

    def append_arrow(self, data: Any, bucket: int | None = None) -> None:
        """Append Arrow data (see :mod:`lakelog.client.arrow_input`) whose columns match the table's
        schema; with bucket keys each row goes to its key's bucket, in the order given."""
        self.append_table_to(self._info, arrow_table(data, self._info.schema, str(self._info.path)), bucket)
        self.serve_acks()

    def append_row_to(self, info: TableInfo, row: Mapping[str, Any], bucket: int | None) -> None:
        """:meth:`append` to ``info``'s buckets (the table's, or one partition's)."""
        unknown = set(row) - self._names
        if unknown:
            raise SchemaMismatchError(f"{self._info.path} has no column(s) {sorted(unknown)}; columns are {self._info.schema.names}")
        assigner = self._assigner(info)
        if bucket is None and assigner.keyed:
            bucket = assigner.row_bucket(row)
        with self._sealing, self._cond:
            self._check_open()
            queue = self.accumulator.queue(info, self._bucket(info, bucket))
            first = not queue.rows
            if first:
                queue.first_row_at = time.monotonic()
            queue.rows.append(dict(row))
            full = len(queue.rows) * self._row_bytes >= self._batch_bytes
            if full:
                self._seal_rows(queue)
        if first or full:  # the sender sends it, or learns when its linger ends
            self.send_soon()
        self._wait_for_room()

    def append_table_to(self, info: TableInfo, table: pa.Table, bucket: int | None, wait: bool = True) -> None:
        """:meth:`append_arrow` of ``table`` to ``info``'s buckets; ``wait``: block while the writer
        holds as many batches as it may (the sender's own calls never wait)."""
        assigner = self._assigner(info)
        if bucket is None and assigner.keyed:
            for key_bucket, rows in assigner.split(table):
                self._append_table(info, rows, key_bucket, wait)
        else:
            self._append_table(info, table, bucket, wait)

    def _append_table(self, info: TableInfo, table: pa.Table, bucket: int | None, wait: bool) -> None:
        if table.num_rows:  # the width of these rows, not of the last ones sealed (or a guess)
            self._row_bytes = max(table.nbytes / table.num_rows, 1.0)
        for batch in table.to_batches(max_chunksize=self._chunk_rows(table.num_rows)):
            if not batch.num_rows:
                continue
            with self._sealing:
                with self._cond:
                    self._check_open()
                    queue = self.accumulator.queue(info, self._bucket(info, bucket))
                    self._seal_rows(queue)
                    writer = self.accumulator.take(queue)
                encoded = rb.encode_batch_buffer(batch, info.schema_id, writer=writer)
                with self._cond:
                    self._add(queue, encoded, writer)
            self.send_soon()
            if wait:
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
        """Send everything appended and wait until it is acknowledged and its report served; raise
        the first failure, else the first exception a report raised."""
        self.send_all()
        with self._cond:
            while not self.flushed():
                self._cond.wait()
        self.end_flush()

    def send_all(self) -> None:
        """A flush's start: seal every bucket's rows and have the sender send them now."""
        with self._sealing, self._cond:
            for queue in list(self.accumulator.queues.values()):
                if queue.rows:
                    self._seal_rows(queue)
        self.send_soon()

    def flushed(self) -> bool:
        """Everything sealed is acknowledged, or a failure ends the flush (lock held)."""
        return not self.accumulator.pending or self.accumulator.error is not None

    def end_flush(self) -> None:
        """A flush's end: serve the reports, raise the first failure or report exception."""
        self.serve_acks()
        with self._cond:
            self._raise_error()
        if self._ack_error is not None:
            error, self._ack_error = self._ack_error, None
            raise error

    def has_room(self) -> bool:
        """The writer holds fewer batches than ``client.writer.max-inflight`` per bucket it writes
        (or failed, or is closed): an append may go on (lock held)."""
        limit = self._inflight * max(len(self.accumulator.queues), self._info.buckets, 1)
        return self.accumulator.pending < limit or self.accumulator.error is not None or self._closed

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
            self._sender.unregister(self)

    @property
    def delivery_stats(self) -> DeliveryStats:
        """Requests and batches resent, and batches given up on, so far."""
        return self.accumulator.delivery.stats

    def __enter__(self) -> "AppendWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_soon(self) -> None:
        """Batches are ready, or rows started to linger: the sender's next turn comes now."""
        self._sender.wakeup()

    # the sender's call

    def linger(self, now: float) -> float:
        """On the sender's thread: seal the rows that waited ``client.writer.linger``; when the
        next ones will have. A row that does not fit the schema is raised by the next call. Only
        rows that lingered wait for a seal the application is making."""
        next_at = self._linger_first(now) if self._linger_first is not None else float("inf")
        with self._cond:
            if not self.accumulator.lingering(now):
                return next_at
        with self._sealing, self._cond:
            for queue in self.accumulator.lingering(now):
                try:
                    self._seal_rows(queue)
                except LakelogError as error:
                    self.accumulator.error = self.accumulator.error or error
        return next_at

    # internals (called with self._cond held unless said otherwise)

    def serve_acks(self) -> None:
        """On the application's thread, outside the writer's lock: a report may take its time or
        call the writer again. A report that raises is logged and kept for ``flush()``."""
        if self._on_ack is None:
            return
        acks = self.accumulator.acks
        with self._serving:
            while acks:
                ack = acks.popleft()
                try:
                    self._on_ack(ack)
                except Exception as error:  # noqa: BLE001 - the user's code: reported, never lost in a thread
                    log.exception("on_ack of the writer of %s raised on %s", self._info.path, ack)
                    self._ack_error = self._ack_error or error

    def _assigner(self, info: TableInfo) -> BucketAssigner:
        assigner = self._assigners.get(info.partition_id)
        if assigner is None:
            assigner = self._assigners[info.partition_id] = BucketAssigner.for_table(info)
        return assigner

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidRequestError(f"the writer of {self._info.path} is closed")
        self._raise_error()
        if self.accumulator.failed is not None:
            raise self.accumulator.failed

    def _raise_error(self) -> None:
        if self.accumulator.error is not None:
            error, self.accumulator.error = self.accumulator.error, None
            raise error

    def _bucket(self, info: TableInfo, bucket: int | None) -> int:
        if bucket is None:
            return self._assigner(info).current
        if not 0 <= bucket < info.buckets:
            raise UnknownBucketError(f"{info.label} has no bucket {bucket} (it has buckets 0..{info.buckets - 1})")
        return bucket

    def _seal_rows(self, queue: BucketQueue) -> None:
        if not queue.rows:
            return
        rows, queue.rows = queue.rows, []
        schema = self._info.schema
        try:
            if any(self._loses_precision(row) for row in rows):
                raise ValueError("a float value would be truncated into an integer column")
            batch = pa.RecordBatch.from_pylist(rows, schema=schema)
        except _CONVERSION_ERRORS as exc:
            faults = [self._fault(row) for row in rows]
            if all(fault is None for fault in faults):  # each column fits alone: the rows together do not
                raise SchemaMismatchError(f"{self._info.path}: {len(rows)} row(s) do not convert: {str(exc).splitlines()[0]}") from None
            good = [row for row, fault in zip(rows, faults) if fault is None]
            first = next(fault for fault in faults if fault is not None)
            if good:
                self._seal(queue, pa.RecordBatch.from_pylist(good, schema=schema))
            raise SchemaMismatchError(
                f"{self._info.path}: {len(rows) - len(good)} row(s) do not match the table's schema, e.g. {first};"
                f" the other {len(good)} row(s) were kept"
            ) from None
        self._seal(queue, batch)

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

    def _seal(self, queue: BucketQueue, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self._row_bytes = max(batch.nbytes / batch.num_rows, 1.0)
            writer = self.accumulator.take(queue)
            self._add(queue, rb.encode_batch_buffer(batch, queue.info.schema_id, writer=writer), writer)

    def _add(self, queue: BucketQueue, encoded: rb.EncodedBatch, writer: tuple[int, int, int]) -> None:
        """Queue ``encoded`` (stamped ``writer``), the bucket's next batch; the bucket is sealed."""
        if self.accumulator.failed is not None:
            raise self.accumulator.failed
        self.accumulator.add(queue, encoded, writer)
        self._assigner(queue.info).sealed(queue.bucket.bucket)

    def _wait_for_room(self) -> None:
        """Block while the writer holds ``client.writer.max-inflight`` batches per bucket it writes."""
        if not self._blocking:
            return
        with self._cond:
            while not self.has_room():
                self._cond.wait()
