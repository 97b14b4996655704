"""The local log of one bucket: a directory of segments named by base offset.

Appends are serialized by one lock; the bytes are stamped with offsets and one commit timestamp
per append, written to the active segment and, in ``sync`` flush mode, fsynced by group commit
before the append returns. The high watermark (HW) is the end of what readers may see: in ``sync``
mode the flushed offset, so no reader ever sees a record a crash could lose; in ``async`` mode the
log end; and for a bucket with other in-sync replicas, never past what they all hold (see
:meth:`LogTablet.set_replica_limit`). Readers take a snapshot of the segment list and the HW's file
position under the lock and then read without it, so a read never holds up appends for longer than
that snapshot. A follower's copy takes the leader's batches as they are
(:meth:`LogTablet.append_as_follower`).
"""

from __future__ import annotations

import logging
import threading
import time
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from lakelog.config import OPTIONS, Configuration
from lakelog.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidRequestError,
    LogFencedError,
    OffsetOutOfRangeError,
    StorageError,
)
from lakelog.record.batch import HEADER_SIZE, BatchHeader, read_header, stamp, validate
from lakelog.record.projection import BatchProjection
from lakelog.server.log.acknowledged_offset import AcknowledgedOffset, AcknowledgedOffsetFile
from lakelog.server.log.durable_files import fsync_directory, write_atomically
from lakelog.server.log.leader_epochs import LeaderEpochs
from lakelog.server.log.log_loader import CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_FILE, LogLoader
from lakelog.server.log.quarantine import QuarantinedRange
from lakelog.server.log.segment import LogSegment
from lakelog.server.log.sequence_waits import SequenceWaits
from lakelog.server.log.writer_snapshot import (
    adopt_writer_snapshot,
    encode_writer_snapshot,
    remove_writer_snapshots,
    restore_writer_snapshot,
    save_writer_snapshot,
)
from lakelog.server.log.writer_state import WriterBatches, WriterState

logger = logging.getLogger(__name__)

_MAX_RELATIVE_OFFSET = 0xFFFFFFFF  # index entries store offsets and positions as uint32
# How long a writer's request that overtook an earlier one waits for it: requests sent back to back
# arrive milliseconds apart; one that failed before it was appended never comes, and the writer
# resends both in order once their answers are in.
SEQUENCE_WAIT_S = 1.0
_MAX_SEGMENT_BYTES = 0x7FFFFFFF  # the wire's segment_size_in_bytes and first_start_pos are int32, as in Fluss


# Called with (buffer, position, header) for each batch whose framing and CRC passed, in the same pass.
BatchCheck = Callable[[memoryview, int, BatchHeader], None]


def wall_clock_ms() -> int:
    """The default clock of commit timestamps: milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class LogConfig:
    """The ``log.*`` settings, in the units the log works in."""

    segment_max_bytes: int = OPTIONS["log.segment.max-bytes"].default
    segment_max_age_ms: int = OPTIONS["log.segment.max-age"].default
    index_interval_bytes: int = OPTIONS["log.index.interval-bytes"].default
    flush_mode: str = OPTIONS["log.flush.mode"].default
    flush_interval_ms: int = OPTIONS["log.flush.interval"].default
    writer_expiration_ms: int = OPTIONS["server.writer-id.expiration-time"].default

    def __post_init__(self) -> None:
        if self.flush_mode not in ("sync", "async"):
            raise InvalidConfigError(f"log flush mode must be sync or async, not {self.flush_mode!r}")
        if not 0 < self.segment_max_bytes <= _MAX_SEGMENT_BYTES:
            raise InvalidConfigError(f"log.segment.max-bytes must be in 1..{_MAX_SEGMENT_BYTES} (2 GiB - 1)")

    @classmethod
    def from_configuration(cls, conf: Configuration) -> LogConfig:
        return cls(
            segment_max_bytes=conf.get("log.segment.max-bytes"),
            segment_max_age_ms=conf.get("log.segment.max-age"),
            index_interval_bytes=conf.get("log.index.interval-bytes"),
            flush_mode=conf.get("log.flush.mode"),
            flush_interval_ms=conf.get("log.flush.interval"),
            writer_expiration_ms=conf.get("server.writer-id.expiration-time"),
        )


@dataclass(frozen=True)
class AppendResult:
    """Where an append landed: offsets ``[base_offset, next_offset)``, all stamped ``commit_timestamp``."""

    base_offset: int
    next_offset: int
    commit_timestamp: int
    record_count: int
    duplicate: bool = False


@dataclass(frozen=True)
class ReadResult:
    """Whole batches as stored (empty at the HW) and the bucket's bounds when they were read;
    ``starts_segment``: the records begin a segment."""

    records: bytes | memoryview
    high_watermark: int
    log_start_offset: int
    starts_segment: bool = False


@dataclass(frozen=True)
class _Mark:
    """An offset together with where it ends in the files: the segment and the byte position."""

    offset: int
    segment: LogSegment
    position: int


class LogTablet:
    """One bucket's log. Open it with :meth:`open`, which creates the directory and recovers
    it (:class:`~lakelog.server.log.log_loader.LogLoader`)."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        bucket: int,
        name: str,
        on_high_watermark: Callable[[], None] | None,
        clock: Callable[[], int],
        sequence_waits: SequenceWaits | None = None,
        acknowledged: Callable[[Path], AcknowledgedOffset] = AcknowledgedOffsetFile,
    ) -> None:
        """``sequence_waits``: the server's, shared by its buckets (None: this log's own);
        ``acknowledged``: where the log keeps its acknowledged offset (its server's checkpoint, or
        a file beside its segments)."""
        self.directory = directory
        self.config = config
        self.bucket = bucket
        self.name = name
        self._on_high_watermark = on_high_watermark
        self._clock = clock
        self._lock = threading.Lock()
        self._flushed = threading.Condition(self._lock)
        self._appended = threading.Condition(self._lock)  # notified after every client append
        self._sequence_waits = sequence_waits or SequenceWaits()
        self._flushing = False
        self._closed = False
        self._acknowledged = acknowledged(directory)
        self.epochs = LeaderEpochs(directory)
        # A follower's copy rolls where its leader's log does, never on its own clock.
        self.following = False
        # Called after each append is written, before it is flushed: a leader wakes its followers'
        # fetches there, so they copy while it flushes (None: no other replica).
        self.on_append: Callable[[], None] | None = None
        self._writers = WriterState(name, config.writer_expiration_ms)
        loaded = LogLoader(directory, config.index_interval_bytes, name, self._writers).load()
        self._segments, self._log_start_offset, self._holes = loaded.segments, loaded.log_start_offset, loaded.quarantined
        self._durable_mark = self._end_mark()  # recovery flushed what it kept
        # The smallest log end among the other in-sync replicas; None while none counts.
        self._replica_limit: int | None = None
        self._fence = self._check_acknowledged()
        self._last_timestamp = max(segment.max_timestamp for segment in self._segments)
        self._high_watermark = self._end_mark()
        # (end offset, commit timestamp) of appends not yet below the high watermark, oldest first.
        self._unpublished: deque[tuple[int, int]] = deque()
        self._stop_flusher = threading.Event()
        self._flusher: threading.Thread | None = None
        if config.flush_mode == "async":
            self._flusher = threading.Thread(target=self._flush_periodically, name=f"flush {name}", daemon=True)
            self._flusher.start()

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        bucket: int,
        name: str,
        on_high_watermark: Callable[[], None] | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        sequence_waits: SequenceWaits | None = None,
        acknowledged: Callable[[Path], AcknowledgedOffset] = AcknowledgedOffsetFile,
    ) -> LogTablet:
        """Open (creating if needed) and recover the log in ``directory``; ``name`` (e.g.
        "shop.orders bucket 3") names the bucket in errors and logs."""
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create log directory {directory}: {exc}") from exc
        return cls(directory, config, bucket, name, on_high_watermark, clock, sequence_waits, acknowledged)

    # -- state ----------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._high_watermark.offset

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def quarantined(self) -> tuple[QuarantinedRange, ...]:
        """Offset ranges of damaged rolled segments set aside at recovery, oldest first."""
        return self._holes

    @property
    def fence(self) -> str | None:
        """Why writes are refused (the log lost acknowledged records), None when they are not."""
        return self._fence

    @property
    def segments(self) -> list[LogSegment]:
        """The segments, oldest first; the last is the active one."""
        return list(self._segments)

    def _end_mark(self) -> _Mark:
        active = self._segments[-1]
        return _Mark(active.next_offset, active, active.size)

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"the log of {self.name} is closed")

    # -- the acknowledged-offset fence ------------------------------------------------------------

    def _check_acknowledged(self) -> str | None:
        """The fence, if recovery ended below the last offset checkpointed as acknowledged."""
        acknowledged, end = self._acknowledged.stored, self._segments[-1].next_offset
        if acknowledged is None or acknowledged <= end:
            return None
        fence = (
            f"{self.name}: the log recovered to offset {end} but offsets up to {acknowledged} had been acknowledged "
            f"(damaged tail in {self._segments[-1].path}); writes are refused so no offset is reused, until an "
            f"operator runs `lakelog repair local ... --bucket {self.bucket} --accept-truncation`"
        )
        logger.error("%s", fence)
        return fence

    def checkpoint_acknowledged(self, durable: bool = True) -> None:
        """Record the durable offset as acknowledged (a timer and close call this); not while
        fenced, which would accept the loss behind the operator's back. ``durable=False`` leaves
        writing it to the caller (the server's timer writes every bucket's at once)."""
        if self._fence is None:
            (self._acknowledged.save if durable else self._acknowledged.note)(self._durable_mark.offset)

    def accept_truncation(self) -> str:
        """The operator's choice (``lakelog repair local --accept-truncation``): the lost records stay
        lost, the log takes writes again from its recovered end. Says what was done."""
        with self._lock:
            self._check_open()
            if self._fence is None:
                return f"{self.name} is not fenced; nothing changed"
            lost_from, lost_to = self.log_end_offset, self._acknowledged.stored
            self._fence = None
            self._acknowledged.save(self.log_end_offset)
        logger.warning("%s: operator accepted the loss of offsets [%d, %d); writes resume at %d", self.name, lost_from, lost_to, lost_from)
        return f"{self.name}: accepted the loss of offsets [{lost_from}, {lost_to}); writes resume at offset {lost_from}"

    # -- appending ------------------------------------------------------------------------------

    def append(
        self, records: bytes | memoryview, check: BatchCheck | None = None, admit: Callable[[], None] | None = None, pipelined: bool = False
    ) -> AppendResult:
        """Append the client's batches; returns once they are durable in sync mode (and visible, unless
        other in-sync replicas must hold them first: :meth:`wait_for_high_watermark`).

        ``check`` sees each batch once its framing and CRC passed and before anything is written
        (the replica layer checks the schema there), in the one pass that validates the request.
        ``admit`` runs under the append lock just before the write and may refuse it: a refusal
        decided elsewhere (a write fence) then holds for every append :meth:`settle` did not wait for.

        Batches of an idempotent writer that this log appended already are not appended again: the
        answer is their original offsets (``duplicate`` set), once those are visible. ``pipelined``:
        the writer sent them while an earlier request of it to this bucket was in flight, which they
        may have overtaken: they wait for it (:meth:`_await_sequence`)."""
        buffer = memoryview(records).cast("B")
        headers = self._validate(buffer, check)
        count = sum(header.record_count for _, header in headers)
        writer = WriterBatches.of([header for _, header in headers], self.name)
        with self._lock:
            self._check_open()
            if writer is not None and pipelined:
                self._await_sequence(writer)
            if self._fence is not None:
                raise LogFencedError(self._fence)
            if admit is not None:
                admit()
            duplicate = self._writers.check(writer, pipelined) if writer is not None else None
            if duplicate is None:
                result, advanced = self._append_locked(buffer, headers, count, writer)
                self._appended.notify_all()
        if duplicate is not None:
            logger.info(
                "%s: writer %d resent batches %d..%d, appended already at offsets [%d, %d); answered without appending",
                self.name, writer.writer_id, writer.first_sequence, writer.last_sequence, duplicate.base_offset, duplicate.next_offset,
            )
            if self.config.flush_mode == "sync":
                self._await_flush(duplicate.next_offset)
            return AppendResult(duplicate.base_offset, duplicate.next_offset, duplicate.commit_timestamp, count, duplicate=True)
        if self.on_append is not None:
            self.on_append()
        if self.config.flush_mode == "sync":
            self._await_flush(result.next_offset)
        elif advanced:
            self._notify_high_watermark()
        return result

    def _await_sequence(self, writer: WriterBatches) -> None:
        """Lock held (released while waiting). A request of a writer with several in flight that
        overtook an earlier one waits up to :data:`SEQUENCE_WAIT_S` for it to be appended; still
        ahead then (the earlier one failed before it was appended, or never came), or when the
        server's places to wait are taken (:mod:`sequence_waits`), the writer's check refuses it
        and the writer sends it again after the earlier one."""
        if not self._writers.is_ahead(writer) or not self._sequence_waits.enter():
            return
        try:
            deadline = time.monotonic() + SEQUENCE_WAIT_S
            while self._writers.is_ahead(writer) and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._appended.wait(remaining)
        finally:
            self._sequence_waits.leave()
        self._check_open()

    def wait_for_high_watermark(self, offset: int, timeout_s: float, still_waiting: Callable[[], bool]) -> bool:
        """Wait until the HW reaches ``offset`` (the other in-sync replicas hold it): True, or False
        once ``timeout_s`` passed, the log closed or ``still_waiting()`` turned false."""
        deadline = time.monotonic() + timeout_s
        with self._flushed:
            while self._high_watermark.offset < offset:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed or not still_waiting():
                    return False
                self._flushed.wait(min(remaining, 0.1))
        return True

    def set_replica_limit(self, limit: int | None) -> None:
        """The smallest log end of the other in-sync replicas (None: no other replica counts): the
        HW moves up to it, never past what this log holds safely itself."""
        with self._lock:
            self._replica_limit = limit
            advanced = self._advance(self._local_mark())
        if advanced:
            self._notify_high_watermark()

    def follow_high_watermark(self, leader_high_watermark: int) -> None:
        """As a follower: the HW is the leader's, cut to what this copy holds. It may go down (the
        follower serves no reads), so a follower that becomes leader shows only what its leader
        had made visible."""
        with self._lock:
            self._replica_limit = leader_high_watermark
            if leader_high_watermark < self._high_watermark.offset:
                self._high_watermark = self._mark_at(leader_high_watermark)
            else:
                self._advance(self._local_mark())

    def append_as_follower(self, records: bytes | memoryview, leader_epoch: int, starts_segment: bool) -> int:
        """Append the leader's batches as they are: offsets, commit timestamps and writer headers
        kept, so writer (idempotence) state is rebuilt here as on the leader; ``leader_epoch`` is the
        epoch they were appended in. Segments roll where the leader's do (``starts_segment``), so
        the copy's rolled segments are the leader's, whoever uploads them. The first batch must
        start at this log's end. Returns the new log end. In ``sync`` mode it is not waited to be
        durable here: the follower reports it to its leader at once and :meth:`settle` fsyncs it off
        that path, as Kafka's followers do (the leader acknowledges only what its own disk holds, so
        an acknowledged record is always durable somewhere, and in every ISR member's page cache);
        this copy's own high watermark waits for the fsync."""
        buffer = memoryview(records).cast("B")
        headers = [header for _, header in self._validate(buffer, None)]
        with self._lock:
            self._check_open()
            expected = self.log_end_offset
            for header in headers:
                if header.base_offset != expected:
                    raise InvalidRequestError(f"{self.name}: the leader's batch starts at offset {header.base_offset}, expected {expected}")
                expected = header.next_offset
            active = self._segments[-1]
            if active.size > 0 and (starts_segment or expected - active.base_offset > _MAX_RELATIVE_OFFSET):
                self._roll()
            self.epochs.assign(leader_epoch, headers[0].base_offset)
            self._segments[-1].append_batches([buffer], headers)
            self._writers.replay(headers)
            self._last_timestamp = max(self._last_timestamp, headers[-1].commit_timestamp)
            self._unpublished.append((expected, headers[-1].commit_timestamp))
            advanced = self.config.flush_mode == "async" and self._advance(self._end_mark())
        if advanced:
            self._notify_high_watermark()
        return expected

    def truncate_to(self, offset: int) -> int:
        """Cut this copy back to the batch boundary at or below ``offset``: what a replica holds past
        where its history and its leader's diverge. Returns the new log end."""
        with self._lock:
            self._check_open()
            if offset >= self.log_end_offset:
                return self.log_end_offset
            before = self.log_end_offset
            kept = [segment for segment in self._segments if segment.base_offset < offset] or [self._segments[0]]
            for segment in self._segments[len(kept) :]:
                segment.delete()
            kept[-1].truncate_to_offset(offset)
            fsync_directory(self.directory)
            self._reset_after_cut(tuple(kept))
            end = self.log_end_offset
            self.epochs.truncate_from_end(end)
        logger.warning("%s: truncated from offset %d to %d to match its leader's log", self.name, before, end)
        return end

    def restart_at(self, offset: int, writer_state: bytes = b"") -> None:
        """Empty this copy and start it again at ``offset``: a follower behind what its leader still
        keeps locally copies from there (what remote storage holds is not copied back).
        ``writer_state``: the leader's idempotent writers as of ``offset`` (a writer snapshot)."""
        with self._lock:
            self._check_open()
            for segment in self._segments:
                segment.delete()
            remove_writer_snapshots(self.directory)
            adopt_writer_snapshot(self.directory, offset, writer_state, self.name)
            self._log_start_offset = offset
            self._write_log_start_offset()
            self._holes = ()
            fresh = LogSegment(self.directory, offset, self.config.index_interval_bytes)
            fsync_directory(self.directory)
            self._reset_after_cut((fresh,))
            self.epochs.clear()
        logger.warning("%s: emptied and restarted at offset %d, its leader's earliest local offset", self.name, offset)

    def writers_at_log_start(self) -> tuple[int, bytes]:
        """The local log start and the idempotent writers' state as of it (a writer snapshot), for
        a follower that starts over there."""
        with self._lock:
            self._check_open()
            start = self._log_start_offset
            return start, encode_writer_snapshot(start, self._writers.entries_before(start))

    def _reset_after_cut(self, segments: tuple[LogSegment, ...]) -> None:
        """State derived from the segments, after the log was cut back. Lock held."""
        self._segments = segments
        self._writers = WriterState(self.name, self.config.writer_expiration_ms)
        restore_writer_snapshot(self.directory, segments[0].base_offset, self._writers, self.name)
        for segment in segments:
            self._writers.replay(header for _, header in segment.iter_batches())
        end = self._end_mark()
        self._durable_mark = end
        if self._high_watermark.offset > end.offset or self._high_watermark.segment not in segments:
            self._high_watermark = end
        self._unpublished = deque(entry for entry in self._unpublished if entry[0] <= end.offset)
        self._last_timestamp = max(segment.max_timestamp for segment in segments)
        self._acknowledged.save(end.offset)

    def settle(self) -> None:
        """Wait until every append admitted so far is visible (in sync mode, durable): whatever
        refuses appends from now on (see ``admit``) leaves the high watermark final."""
        with self._lock:
            end = self.log_end_offset
        if self.config.flush_mode == "sync":
            self._await_flush(end)

    def _append_locked(
        self, buffer: memoryview, headers: list[tuple[int, BatchHeader]], count: int, writer: WriterBatches | None
    ) -> tuple[AppendResult, bool]:
        """Stamp and write the batches; True with the result if the high watermark moved. Lock held.
        Only each batch's header is copied to be stamped; its body goes to the file as received."""
        now = self._clock()
        commit_timestamp = max(now, self._last_timestamp)
        base_offset = self.log_end_offset
        if self._should_roll(now, len(buffer), count):
            self._roll()
        offset = base_offset
        pieces: list[bytearray | memoryview] = []
        stamped = []
        for position, header in headers:
            head = bytearray(buffer[position : position + HEADER_SIZE])
            stamp(head, 0, offset, commit_timestamp)
            pieces += (head, buffer[position + HEADER_SIZE : position + header.size])
            stamped.append(replace(header, base_offset=offset, commit_timestamp=commit_timestamp))
            offset += header.record_count
        self._segments[-1].append_batches(pieces, stamped)
        if writer is not None:
            self._writers.appended(writer, stamped)
        self._last_timestamp = commit_timestamp
        self._unpublished.append((offset, commit_timestamp))
        advanced = self.config.flush_mode == "async" and self._advance(self._end_mark())
        return AppendResult(base_offset, offset, commit_timestamp, count), advanced

    def expire_writers(self) -> int:
        """Forget the idempotent writers idle past their expiration time; how many went."""
        with self._lock:
            if self._closed:
                return 0
            expired = self._writers.expire(self._clock())
        if expired:
            logger.info("%s: forgot %d idempotent writer(s) idle for over %d ms", self.name, expired, self.config.writer_expiration_ms)
        return expired

    def barrier_safe_time(self) -> int:
        """The largest T such that every record stamped <= T is visible (below the high watermark)
        and no later append is stamped <= T: commit timestamps are ``max(clock, last)``, so a later
        append is stamped >= the clock now, and an append still flushing holds T below its stamp."""
        with self._lock:
            now = self._clock()
            return min(now, self._unpublished[0][1]) - 1 if self._unpublished else now - 1

    def _validate(self, buffer: memoryview, check: BatchCheck | None) -> list[tuple[int, BatchHeader]]:
        if not buffer:
            raise InvalidRequestError(f"{self.name}: an append needs at least one batch")
        headers = []
        position = 0
        while position < len(buffer):
            if position + HEADER_SIZE > len(buffer) or position + read_header(buffer, position).size > len(buffer):
                raise InvalidRequestError(f"{self.name}: the append ends with a partial batch at byte {position}")
            header = validate(buffer, position, self.name)
            if check is not None:
                check(buffer, position, header)
            headers.append((position, header))
            position += header.size
        return headers

    def _should_roll(self, now: int, incoming_bytes: int, incoming_records: int) -> bool:
        active = self._segments[-1]
        return active.size > 0 and (
            active.size + incoming_bytes > self.config.segment_max_bytes
            or self._aged(now)
            or active.next_offset + incoming_records - active.base_offset > _MAX_RELATIVE_OFFSET
        )

    def _aged(self, now: int) -> bool:
        first_timestamp = self._segments[-1].first_timestamp
        return first_timestamp is not None and now - first_timestamp > self.config.segment_max_age_ms

    def _roll(self) -> None:
        """Seal the active segment (fsynced with its indexes) and start a new one. Lock held."""
        old = self._segments[-1]
        old.flush()
        new = LogSegment(self.directory, old.next_offset, self.config.index_interval_bytes)
        fsync_directory(self.directory)
        self._segments = (*self._segments, new)
        logger.debug("%s rolled %s", self.name, old)

    def roll(self) -> None:
        """Roll the active segment now, unless it is empty."""
        with self._lock:
            self._check_open()
            if self._segments[-1].size > 0:
                self._roll()

    def maybe_roll_by_age(self) -> bool:
        """Roll the active segment if its first batch is older than the segment max age; a closed
        log (a bucket being dropped while a timer runs) just answers False."""
        with self._lock:
            if self._closed or self.following or not self._aged(self._clock()):
                return False
            self._roll()
            return True

    # -- flushing and the high watermark --------------------------------------------------------

    def _local_mark(self) -> _Mark:
        """How far this log alone may show: the durable end in ``sync`` mode, else the end. Lock held."""
        return self._durable_mark if self.config.flush_mode == "sync" else self._end_mark()

    def _mark_at(self, offset: int) -> _Mark:
        """The batch boundary at or below ``offset``, with its place in the files. Lock held."""
        segments = self._segments
        segment = segments[max(bisect_right(segments, offset, key=lambda s: s.base_offset) - 1, 0)]
        found = segment.find_position(offset) if segment.base_offset <= offset < segment.next_offset else None
        if found is None:
            return _Mark(segment.next_offset, segment, segment.size) if offset >= segment.next_offset else _Mark(segment.base_offset, segment, 0)
        return _Mark(found[1].base_offset, segment, found[0])

    def _advance(self, candidate: _Mark) -> bool:
        """Move the HW to ``candidate`` (safe on this log), or short of it to what the other in-sync
        replicas hold; True if it moved. Lock held."""
        limit = self._replica_limit
        if limit is not None and limit < candidate.offset:
            if limit <= self._high_watermark.offset:
                return False
            candidate = self._mark_at(limit)
        return self._publish(candidate)

    def _publish(self, mark: _Mark) -> bool:
        """Move the HW forward to ``mark``; True if it moved. Lock held."""
        if mark.offset <= self._high_watermark.offset:
            return False
        self._high_watermark = mark
        while self._unpublished and self._unpublished[0][0] <= mark.offset:
            self._unpublished.popleft()
        self._flushed.notify_all()  # appends waiting for the other replicas (wait_for_high_watermark)
        return True

    def _notify_high_watermark(self) -> None:
        """Never called under the lock: the callback may read the log right away. Its failure is
        logged, not raised: the append it follows has already succeeded."""
        if self._on_high_watermark is None:
            return
        try:
            self._on_high_watermark()
        except Exception:
            logger.exception("high watermark callback of %s failed", self.name)

    def _await_flush(self, offset: int) -> None:
        """Group commit: wait until ``offset`` is durable, flushing for everyone if nobody is.

        The first waiter that finds no flush in progress fsyncs, outside the lock, everything
        appended so far; appends that arrive meanwhile wait and share the next fsync.
        """
        advanced = False
        with self._flushed:
            while self._durable_mark.offset < offset:
                if self._flushing:
                    self._flushed.wait()
                else:
                    advanced = self._lead_flush() or advanced
        if advanced:
            self._notify_high_watermark()

    def _lead_flush(self) -> bool:
        """fsync the log up to its current end for every waiter, then publish that end as the HW;
        True if the HW moved. Called with the lock held, which it releases during the fsync."""
        self._flushing = True
        mark = self._end_mark()
        self._lock.release()
        try:
            mark.segment.flush_log()
        finally:
            self._lock.acquire()
            self._flushing = False
            self._flushed.notify_all()  # covered waiters return; the others elect the next leader
        if mark.offset > self._durable_mark.offset:
            self._durable_mark = mark
        return self._advance(self._local_mark())

    def flush(self) -> None:
        """fsync everything appended so far, indexes included."""
        with self._lock:
            self._check_open()
            mark = self._end_mark()
        mark.segment.flush()
        with self._lock:
            if mark.offset > self._durable_mark.offset:
                self._durable_mark = mark
            advanced = self._advance(self._local_mark())
        if advanced:
            self._notify_high_watermark()

    def _flush_periodically(self) -> None:
        interval = self.config.flush_interval_ms / 1000
        while not self._stop_flusher.wait(interval):
            try:
                self.flush()
            except StorageError:
                logger.exception("periodic flush of %s failed", self.name)

    def close(self, durable_checkpoint: bool = True) -> None:
        """Flush, close every segment and leave a clean-shutdown marker so the next open can trust
        the indexes of the active segment. Appends already written are acknowledged by the final
        flush; later ones are refused. ``durable_checkpoint=False`` leaves writing the acknowledged
        offset to the caller, which closes many logs and writes all of theirs once."""
        self._stop_flusher.set()
        if self._flusher is not None:
            self._flusher.join()
        with self._flushed:
            if self._closed:
                return
            self._closed = True
            self._appended.notify_all()
            while self._flushing:
                self._flushed.wait()
            advanced = self._lead_flush()
        if advanced:
            self._notify_high_watermark()
        self._segments[-1].flush()
        try:
            self.checkpoint_acknowledged(durable_checkpoint)
        except StorageError as error:
            # Safe to go on: the checkpoint may lag what was acknowledged, it must never lead.
            logger.error("%s: acknowledged offset not checkpointed at close: %s", self.name, error)
        for segment in self._segments:
            segment.close()
        try:
            (self.directory / CLEAN_SHUTDOWN_FILE).touch()
            fsync_directory(self.directory)
        except (OSError, StorageError):
            if self.directory.exists():
                raise
            logger.info("%s: its directory was deleted as it closed (dropped as the server stopped)", self.name)

    # -- reading --------------------------------------------------------------------------------

    def _snapshot(self) -> tuple[tuple[LogSegment, ...], _Mark, int]:
        with self._lock:
            self._check_open()
            return self._segments, self._high_watermark, self._log_start_offset

    def read(self, fetch_offset: int, max_bytes: int, projection: BatchProjection | None = None) -> ReadResult:
        """Whole batches of one segment from the batch holding ``fetch_offset``, up to the HW, at
        most ``max_bytes`` of them but at least one; with ``projection``, those batches projected
        onto its columns, ``max_bytes`` counting the projected bytes."""
        segments, high_watermark, start = self._snapshot()
        return self._read_to(segments, high_watermark, high_watermark.offset, start, fetch_offset, max_bytes, projection)

    def read_for_follower(self, fetch_offset: int, max_bytes: int) -> tuple[ReadResult, int]:
        """What a follower copies: whole batches from ``fetch_offset`` past the HW up to the log end,
        but not past the end of the leader epoch they were appended in, and that epoch (the
        follower records it, see :mod:`leader_epochs`)."""
        with self._lock:
            self._check_open()
            epoch, next_start = self.epochs.epoch_at(fetch_offset)
            end = self._end_mark() if next_start is None or next_start >= self.log_end_offset else self._mark_at(next_start)
            segments, high_watermark, start = self._segments, self._high_watermark, self._log_start_offset
        return self._read_to(segments, end, high_watermark.offset, start, fetch_offset, max_bytes, None), epoch

    def _read_to(
        self,
        segments: tuple[LogSegment, ...],
        limit: _Mark,
        high_watermark: int,
        start: int,
        fetch_offset: int,
        max_bytes: int,
        projection: BatchProjection | None,
    ) -> ReadResult:
        if max_bytes < 0:
            raise InvalidRequestError(f"{self.name}: max bytes {max_bytes} is negative")
        if not start <= fetch_offset <= max(limit.offset, segments[-1].next_offset):
            raise OffsetOutOfRangeError(self.bucket, fetch_offset, start)
        if fetch_offset >= limit.offset:
            # Past the HW but held here: a new leader's HW catches up with what a reader saw from the
            # one before once its followers fetch, so the reader waits, it is not out of range.
            return ReadResult(b"", high_watermark, start)
        for hole in self._holes:
            if fetch_offset in hole:
                raise CorruptRecordError(f"{hole.describe(self.name)}; offset {fetch_offset} cannot be read locally")
        segment = segments[bisect_right(segments, fetch_offset, key=lambda s: s.base_offset) - 1]
        found = segment.find_position(fetch_offset)
        if found is None:
            raise CorruptRecordError(f"{segment.path}: offset {fetch_offset} of {self.name} is not in the segment")
        end = limit.position if segment is limit.segment else segment.size
        starts = found[0] == 0
        if projection is None:
            return ReadResult(segment.read(found[0], max_bytes, end, fetch_offset), high_watermark, start, starts)
        return ReadResult(segment.read_projected(found[0], max_bytes, end, fetch_offset, projection), high_watermark, start, starts)

    def lookup_offset_by_timestamp(self, timestamp: int) -> int | None:
        """The first offset whose commit timestamp is >= ``timestamp``, None if all are older.

        All records of a batch share its timestamp, so this is the base offset of a batch (or the
        log start offset, if the log starts inside that batch).
        """
        segments, high_watermark, start = self._snapshot()
        for segment in segments:
            if segment.base_offset >= high_watermark.offset:
                break
            if segment.max_timestamp < timestamp:
                continue
            end = high_watermark.position if segment is high_watermark.segment else segment.size
            found = segment.find_offset_by_timestamp(timestamp, end)
            if found is not None:
                return max(found, start)
        return None

    # -- retention ------------------------------------------------------------------------------

    def delete_segments_before(self, offset: int) -> int:
        """Delete the rolled segments whose records all lie below ``offset`` and move the log start
        offset to the first remaining record; returns how many segments went."""
        with self._lock:
            self._check_open()
            doomed = [segment for segment in self._segments[:-1] if segment.next_offset <= offset]
            if not doomed:
                return 0
            self._segments = self._segments[len(doomed) :]
            first = self._segments[0].base_offset
            # The writers of the doomed segments outlive them: kept as of the first segment left,
            # before anything goes (see writer_snapshot for the order).
            save_writer_snapshot(self.directory, first, self._writers.entries_before(first))
            gone = [hole for hole in self._holes if hole.end <= offset]
            self._holes = self._holes[len(gone) :]
            self._log_start_offset = min([first, *(hole.start for hole in self._holes)])
            self._write_log_start_offset()
            for segment in doomed:
                segment.delete()
            remove_writer_snapshots(self.directory, keep=first)
            for hole in gone:
                if hole.path is not None:
                    hole.path.unlink(missing_ok=True)
            fsync_directory(self.directory)
        logger.info("%s deleted %d segments, log start offset now %d", self.name, len(doomed), self._log_start_offset)
        return len(doomed)

    def _write_log_start_offset(self) -> None:
        write_atomically(self.directory / LOG_START_OFFSET_FILE, str(self._log_start_offset).encode())
