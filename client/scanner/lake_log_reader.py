"""One bucket's pass over the offsets a FetchLog answer said only the lake holds.

A background thread pulls record batches from the table's LogSource into a queue, so the lake is
read while the caller processes records; each queued batch holds its bytes against the scanner's
:class:`ReadAheadBudget`, so memory stays bounded per scanner whatever the range or the buckets.
Every batch is checked to continue exactly where the previous one ended: a LogSource that skips,
repeats or reorders an offset raises LakeDataError instead of handing the consumer a wrong log.
Once ``[fetch offset, log_end_offset)`` is read the bucket goes back to the server at
``log_end_offset``, exactly as after a remote read.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import LakeDataError, LakeError, LakelogError

from lakelog.log_source import FetchContext, LogSource
from lakelog.client.scanner.batch_decoder import offsets_array
from lakelog.client.scanner.read_ahead_budget import ReadAheadBudget
from lakelog.record.meta_columns import OFFSET_COLUMN

# Batches read ahead per bucket at most; their bytes are bounded by the scanner's budget. Many, because
# a lake of small files gives small batches, and a poll takes what is queued: 4 would mean 4 files per poll.
PREFETCH_BATCHES = 256
_PUT_TIMEOUT_S = 0.1


class _Finished:
    """Queued after the last batch."""


class LakeLogReader:
    tier = "lake"

    def __init__(
        self,
        source: LogSource,
        context: FetchContext,
        out_schema: pa.Schema,
        where: str,
        high_watermark: int,
        budget: ReadAheadBudget,
        on_ready: Callable[[], None],
    ) -> None:
        """``out_schema`` is the projected schema with the meta columns; ``where`` names the bucket
        in errors; ``on_ready`` is called on the reader thread whenever something was queued."""
        self.next_offset = context.fetch_start_offset
        self.high_watermark = high_watermark
        self._context = context
        self._out_schema = out_schema
        self._where = where
        self._budget = budget
        self._on_ready = on_ready
        # A batch is queued with the bytes it holds against the budget: RecordBatch.nbytes walks every
        # buffer (tens of microseconds), which a lake of small files would pay per batch again and again.
        self._queue: queue.Queue[tuple[pa.RecordBatch, int] | LakelogError | _Finished] = queue.Queue(PREFETCH_BATCHES)
        self._stop = threading.Event()
        self._finished = False
        self._error: LakelogError | None = None
        # What a read limited by records left of a batch, and the bytes the whole batch holds.
        self._head: pa.RecordBatch | None = None
        self._head_bytes = 0
        self._thread = threading.Thread(target=self._run, args=(source,), name=f"lake-read {where}", daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        """The range is read: the next records come from the server."""
        return self._finished

    def ready(self) -> bool:
        """:meth:`read` will not wait."""
        return self._error is not None or self._head is not None or not self._queue.empty()

    def read(self, max_bytes: int, max_records: int | None = None) -> pa.Table:
        """Queued records from :attr:`next_offset` on, about ``max_bytes`` (at least one batch) and
        at most ``max_records`` (None: no limit; the rest of a batch cut short comes next time);
        empty while the lake is still being read. An error after some records is raised by the
        next call, so the consumer's position stops exactly at the last good record."""
        if self._error is not None:
            raise self._error
        pieces: list[pa.RecordBatch] = []
        consumed = rows = 0
        while consumed < max(max_bytes, 1) and not self._finished and (max_records is None or rows < max_records):
            item = self._next_item()
            if item is None:
                break
            if isinstance(item, _Finished):
                self._finished = True
            elif isinstance(item, LakelogError):
                if not pieces:
                    raise item
                self._error = item
                break
            else:
                batch, held = item
                if max_records is not None and rows + batch.num_rows > max_records:
                    self._head, self._head_bytes = batch.slice(max_records - rows), held
                    batch = batch.slice(0, max_records - rows)
                else:
                    self._budget.release(held)
                pieces.append(batch)
                consumed += held
                rows += batch.num_rows
                self.next_offset += batch.num_rows
        return pa.Table.from_batches(pieces, schema=self._out_schema)

    def _next_item(self) -> tuple[pa.RecordBatch, int] | LakelogError | _Finished | None:
        """The rest of a batch cut short, else the next queued item (a batch with the bytes it
        holds); None when nothing is queued."""
        if self._head is not None:
            head, self._head = self._head, None
            return head, self._head_bytes
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return None

    def close(self) -> None:
        """Stop the reader thread (it closes the LogSource's iterator on its way out) and free
        what it queued."""
        self._stop.set()
        if self._head is not None:
            self._head = None
            self._budget.release(self._head_bytes)
        self._drain()

    def _drain(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, tuple):
                self._budget.release(item[1])

    # the reader thread

    def _run(self, source: LogSource) -> None:
        try:
            batches = source.fetch_log_records(self._context)
            try:
                self._pump(batches)
            finally:
                close = getattr(batches, "close", None)
                if close is not None:
                    close()
        except LakelogError as error:
            self._put(error)
        except Exception as exc:  # noqa: BLE001 - a plugin's own failure must reach poll() as a lakelog error
            self._put(LakeError(f"{self._where}: the lake LogSource failed: {type(exc).__name__}: {exc}"))
        finally:
            if self._stop.is_set():
                self._drain()  # what was queued after close() drained

    def _pump(self, batches: Iterator[pa.RecordBatch]) -> None:
        expected = self._context.fetch_start_offset
        end = self._context.log_end_offset_of_snapshot
        for batch in batches:
            checked = self._checked(batch, expected, end)
            if self._stop.is_set() or (checked.num_rows and not self._put(checked)):
                return
            expected += checked.num_rows
            if expected >= end:
                break  # never ask the LogSource for more than the range: it may start another file
        if expected < end:
            raise LakeDataError(
                f"{self._where}: lake snapshot {self._context.lake_snapshot_id} ends at offset {expected}, but the"
                f" server said it holds offsets up to {end - 1} (a gap)"
            )
        self._put(_Finished())

    def _checked(self, batch: pa.RecordBatch, expected: int, end: int) -> pa.RecordBatch:
        """``batch`` as the scanner's schema (cast only when the LogSource gave another), cut at
        ``end``; raises LakeDataError unless its offsets run from ``expected`` on. Checked by the
        first and last offset and the row count: a gap or a duplicate moves the last offset (files
        hold rows sorted by offset), and this costs nothing per row."""
        if not batch.schema.equals(self._out_schema):
            try:
                batch = pa.RecordBatch.from_arrays(
                    [batch.column(f.name).cast(f.type) for f in self._out_schema], schema=self._out_schema
                )
            except (KeyError, pa.ArrowException) as exc:
                raise LakeDataError(f"{self._where}: a lake batch does not match {self._out_schema}: {exc}") from None
        batch = batch.slice(0, min(batch.num_rows, end - expected))
        if not batch.num_rows:
            return batch
        offsets = batch.column(OFFSET_COLUMN)
        if offsets[0].as_py() != expected or offsets[-1].as_py() != expected + batch.num_rows - 1:
            wanted = offsets_array(expected, batch.num_rows)
            index = pc.index(pc.not_equal(offsets, wanted), True).as_py()
            got, want = offsets[index].as_py(), expected + index
            kind = "a gap" if got > want else "a duplicate"
            raise LakeDataError(
                f"{self._where}: lake snapshot {self._context.lake_snapshot_id} returned offset {got} where offset"
                f" {want} was expected ({kind}, or offsets out of order)"
            )
        return batch

    def _put(self, item: pa.RecordBatch | LakelogError | _Finished) -> bool:
        """Queue ``item``, waiting for room in the queue and, for a batch, in the scanner's
        budget; False once the reader is closed."""
        held = item.nbytes if isinstance(item, pa.RecordBatch) else 0
        if held and not self._budget.reserve(held, self._stop):
            return False
        queued = (item, held) if isinstance(item, pa.RecordBatch) else item
        while not self._stop.is_set():
            try:
                self._queue.put(queued, timeout=_PUT_TIMEOUT_S)
            except queue.Full:
                continue
            self._on_ready()
            return True
        self._budget.release(held)
        return False
