"""One segment of a bucket's log: a ``.log`` file of whole stamped batches plus its two indexes.

Files are named by the segment's base offset, ``<base:020d>.log/.index/.timeindex``, as in Kafka.
All reads use ``os.pread`` on one descriptor, so readers on other threads never share a file
position with the appender and never need its lock.

A segment opened over existing files knows nothing about them until :meth:`LogSegment.sanity_check`
(cheap, for rolled segments) or :meth:`LogSegment.recover` (full, for the active one) has run.

A read checks the CRC of each batch it returns only once per process, as Kafka's broker trusts
what it validated at append: every batch written here passed its CRC check on the way in, and so
did every batch recovery or an earlier read checked. ``_verified_end`` is where that known-good
prefix of the file ends; re-checking it on every fetch was a tenth of a local read's server time.
A segment found on disk at startup is checked by its first reads, so damage done to it at rest is
still reported naming the file; the client checks every batch again whatever the server did.
"""

from __future__ import annotations

import logging
import os
import weakref
from pathlib import Path
from typing import Iterator, Sequence

from lakelog.errors import CorruptRecordError, StorageError
from lakelog.record.batch import HEADER_SIZE, LOG_OVERHEAD, MAGIC, BatchHeader, check_format, iter_headers, read_header, validate
from lakelog.record.projection import PREFIX_BYTES, BatchProjection, ProjectedBatch
from lakelog.server.log.offset_index import OffsetIndex
from lakelog.server.log.time_index import TimeIndex

logger = logging.getLogger(__name__)

_MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_IOV_MAX = 1024  # buffers one pwritev takes (Linux's IOV_MAX)
QUARANTINE_SUFFIX = ".quarantined"


class LogSegment:
    """Appends, reads and recovers the batches of one ``.log`` file."""

    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int) -> None:
        self.base_offset = base_offset
        stem = directory / f"{base_offset:020d}"
        self.path = stem.with_suffix(".log")
        self._index_interval_bytes = index_interval_bytes
        try:
            self._fd = fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            # The descriptor outlives delete(): a reader that took a snapshot of the segment list
            # before the delete keeps reading the unlinked file until it drops the segment.
            self._release = weakref.finalize(self, os.close, fd)
            self.size = os.fstat(fd).st_size
        except OSError as exc:
            raise StorageError(f"cannot open segment {self.path}: {exc}") from exc
        self.offset_index = OffsetIndex(stem.with_suffix(".index"), base_offset)
        self.time_index = TimeIndex(stem.with_suffix(".timeindex"), base_offset)
        self._verified_end = 0
        self._reset_state()

    def _reset_state(self) -> None:
        self.next_offset = self.base_offset
        self.first_timestamp: int | None = None
        self.max_timestamp = -1
        self._bytes_since_index_entry = 0

    def __repr__(self) -> str:
        return f"LogSegment({self.path.name}, offsets [{self.base_offset}, {self.next_offset}), {self.size} bytes)"

    # -- writing ------------------------------------------------------------------------------

    def append(self, records: bytes | bytearray | memoryview) -> None:
        """Write whole stamped batches at the end; a failed write leaves the file as it was."""
        self.append_batches([records], [header for _, header in iter_headers(records)])

    def append_batches(self, pieces: Sequence[bytes | bytearray | memoryview], headers: Sequence[BatchHeader]) -> None:
        """Write ``pieces``, together whole stamped batches whose headers are ``headers``, at the
        end with gathered writes: a batch's stamped header and its body as received go to the file
        without being joined in memory first. A failed write leaves the file as it was."""
        position = self.size
        try:
            written = _write_all(self._fd, [memoryview(piece).cast("B") for piece in pieces if len(piece)], position)
        except OSError as exc:
            try:
                os.ftruncate(self._fd, position)
            except OSError:
                logger.exception("cannot cut the partial write off %s at byte %d", self.path, position)
            raise StorageError(f"cannot write segment {self.path}: {exc}") from exc
        at = position
        for header in headers:
            self._track(at, header)
            at += header.size
        self.size = position + written
        self._extend_verified(position, self.size)  # the caller validated every batch (LogTablet.append)

    def _extend_verified(self, start: int, end: int) -> None:
        """Bytes ``[start, end)`` passed their CRC checks: the known-good prefix grows when they
        continue it. Readers race here without a lock: a lost update only means a batch is checked again."""
        if start <= self._verified_end < end:
            self._verified_end = end

    def _track(self, position: int, header: BatchHeader) -> None:
        """Account for a batch now in the file: offsets, timestamps and, when due, index entries."""
        if position == 0 or self._bytes_since_index_entry >= self._index_interval_bytes:
            self.offset_index.append(header.base_offset, position)
            self.time_index.append(header.commit_timestamp, header.base_offset)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += header.size
        if self.first_timestamp is None:
            self.first_timestamp = header.commit_timestamp
        self.max_timestamp = max(self.max_timestamp, header.commit_timestamp)
        self.next_offset = header.next_offset

    def flush_log(self) -> None:
        """fsync the batches only: what an acknowledgement needs, since the active segment's indexes
        are rebuilt by recovery after a crash."""
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise StorageError(f"cannot fsync segment {self.path}: {exc}") from exc

    def flush(self) -> None:
        """fsync the batches and both indexes, as a roll and a clean shutdown need."""
        self.flush_log()
        self.offset_index.flush()
        self.time_index.flush()

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        self._release()

    def delete(self) -> None:
        """Unlink the three files; the log descriptor closes once no reader holds the segment."""
        self.offset_index.delete()
        self.time_index.delete()
        self.path.unlink(missing_ok=True)

    # -- reading ------------------------------------------------------------------------------

    def _pread(self, length: int, position: int) -> bytes:
        try:
            return os.pread(self._fd, length, position)
        except OSError as exc:
            raise StorageError(f"cannot read segment {self.path} at byte {position}: {exc}") from exc

    def _pread_into(self, view: memoryview, position: int) -> None:
        try:
            done = 0
            while done < len(view):
                read = os.preadv(self._fd, [view[done:]], position + done)
                if read == 0:
                    raise OSError(f"the file ends before byte {position + len(view)}")
                done += read
        except OSError as exc:
            raise StorageError(f"cannot read segment {self.path} at byte {position}: {exc}") from exc

    def _headers(self, position: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of the batches in ``[position, end)``, one small pread each; anything but whole
        batches up to ``end`` is corruption, and a batch of an older format is refused."""
        while position < end:
            header = self._header_at(self._pread(HEADER_SIZE, position), position, end)
            yield position, header
            position += header.size

    def _header_at(self, raw: bytes, position: int, end: int) -> BatchHeader:
        """The header opening ``raw``, read at ``position``, of a whole batch before ``end``."""
        header = read_header(raw) if len(raw) >= HEADER_SIZE else None
        if header is not None:
            check_format(header, f"{self.path} at byte {position}")
        if header is None or header.length < _MIN_LENGTH or position + header.size > end:
            raise CorruptRecordError(f"{self.path}: no whole batch at byte {position} (data ends at byte {end})")
        return header

    def iter_batches(self) -> Iterator[tuple[int, BatchHeader]]:
        """Position and header of every batch, oldest first: what the remote tier builds its
        dense indexes from when it uploads a rolled segment."""
        return self._headers(0, self.size)

    def iter_chunks(self, chunk_size: int) -> Iterator[bytes]:
        """The ``.log`` bytes in chunks of at most ``chunk_size``, so an upload never holds a whole
        segment in memory; read through the open descriptor, so a concurrent delete cannot cut it."""
        for position in range(0, self.size, chunk_size):
            yield self._pread(min(chunk_size, self.size - position), position)

    def _scan_start(self, position: int, offset: int) -> int:
        """``position`` from an index, if a batch at or before ``offset`` starts there; else 0, so a
        damaged index entry costs a longer scan, never a wrong answer."""
        if position == 0:
            return 0
        if position + HEADER_SIZE <= self.size:
            header = read_header(self._pread(HEADER_SIZE, position))
            if header.magic == MAGIC and self.base_offset <= header.base_offset <= offset:
                return position
        logger.warning("%s: index entry for offset %d points at byte %d, not at a batch; scanning from the start", self.path, offset, position)
        return 0

    def find_position(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the batch holding ``offset``; None past the segment's end."""
        for position, header in self._headers(self._scan_start(self.offset_index.lookup(offset), offset), self.size):
            if header.next_offset > offset:
                return position, header
        return None

    def find_offset_by_timestamp(self, timestamp: int, max_position: int) -> int | None:
        """Base offset of the first batch before ``max_position`` with a timestamp >= ``timestamp``."""
        entry_offset = self.time_index.lookup(timestamp)
        start = self._scan_start(self.offset_index.lookup(entry_offset), entry_offset)
        for _, header in self._headers(start, max_position):
            if header.commit_timestamp >= timestamp:
                return header.base_offset
        return None

    def read(self, start_position: int, max_bytes: int, max_position: int, holding: int | None = None) -> bytes | memoryview:
        """Whole batches from ``start_position`` (a batch boundary before ``max_position``), at most
        ``max_bytes`` of them but at least one, none past ``max_position``; the first holds offset
        ``holding`` when given. Every batch returned has passed its CRC check, and its offsets
        continue the previous one's (the stamped base offset lies outside the CRC). A read that
        ends inside a batch is trimmed as a view: copying it was a fifth of a local fetch's time."""
        data = self._pread(max(0, min(max_bytes, max_position - start_position)), start_position)
        headers = list(iter_headers(data))
        if not headers:
            # The first batch alone is bigger than max_bytes: return it whole, or a reader with a
            # small budget would never get past it.
            _, header = next(self._headers(start_position, max_position))
            data = self._pread(header.size, start_position)
            headers = [(0, header)]
        first = headers[0][1]
        self._check_holds(start_position, first, holding)
        self._check(data, start_position, headers, first.base_offset)
        end = headers[-1][0] + headers[-1][1].size
        return data if end == len(data) else memoryview(data)[:end]

    def read_projected(
        self, start_position: int, max_bytes: int, max_position: int, holding: int | None, projection: BatchProjection
    ) -> bytearray:
        """:meth:`read` of ``projection``'s columns, ``max_bytes`` counting projected bytes. Of a
        batch known good only the header, the Arrow metadata and the kept columns are read; one not
        checked yet is read whole for its CRC."""
        # Sized as if projected batches were no bigger than stored ones (all but a few bytes are).
        out = bytearray(min(max_bytes, max_position - start_position))
        used = 0
        position, expected = start_position, -1
        while position < max_position:
            prefix = self._pread(min(PREFIX_BYTES, max_position - position), position)
            header = self._header_at(prefix, position, max_position)
            if position == start_position:
                self._check_holds(position, header, holding)
            else:
                self._check_continues(position, header, expected)
            piece = self._project(prefix, position, header, projection)
            size = piece.size if isinstance(piece, ProjectedBatch) else len(piece)
            if used and used + size > max_bytes:
                break
            if used + size > len(out):
                out += bytes(used + size - len(out))
            with memoryview(out) as view:
                if isinstance(piece, ProjectedBatch):
                    piece.write(view[used : used + size], self._pread_into)
                else:
                    view[used : used + size] = piece
            used += size
            expected = header.next_offset
            position += header.size
        del out[used:]
        return out

    def _project(self, prefix: bytes, position: int, header: BatchHeader, projection: BatchProjection) -> ProjectedBatch | bytes:
        """The batch at ``position`` projected: planned from its metadata when it is known good and
        laid out plainly, else read whole, checked and decoded."""
        try:
            planned = projection.plan(prefix, position, header, self._pread_into) if position + header.size <= self._verified_end else None
        except CorruptRecordError as error:
            raise CorruptRecordError(f"{self.path} at byte {position}: {error.message}") from None
        if planned is not None:
            return planned
        whole = self._pread(header.size, position)
        self._check(whole, position, [(0, header)], header.base_offset)
        return projection.project_decoded(whole, 0, header)

    def _check_holds(self, position: int, first: BatchHeader, holding: int | None) -> None:
        """The first batch of a read holds the offset the reader asked for."""
        if holding is not None and not first.base_offset <= holding < first.next_offset:
            raise CorruptRecordError(
                f"{self.path} at byte {position}: batch offsets [{first.base_offset}, {first.next_offset}) "
                f"do not hold offset {holding} (a damaged header)"
            )

    def _check(
        self, data: bytes, start_position: int, headers: list[tuple[int, BatchHeader]], expected: int, trust: bool = True
    ) -> int:
        """CRC of each batch (with ``trust``, of each one not known good yet) and offsets continuing
        from ``expected``; returns the next offset. Checked batches that continue the known-good
        prefix extend it."""
        for position, header in headers:
            start = start_position + position
            end = start + header.size
            if end > self._verified_end or not trust:
                validate(data, position, f"{self.path} at byte {start}")
                self._extend_verified(start, end)
            self._check_continues(start, header, expected)
            expected = header.next_offset
        return expected

    def _check_continues(self, position: int, header: BatchHeader, expected: int) -> None:
        if header.base_offset != expected:
            raise CorruptRecordError(
                f"{self.path} at byte {position}: batch offset {header.base_offset}, expected {expected} (a damaged header)"
            )

    def verify(self, chunk_bytes: int = 1 << 20) -> None:
        """Check every batch of the segment (CRC and offsets from the base offset), a chunk of whole
        batches at a time, trusting nothing checked before: what an upload does first, so a batch
        damaged on disk since it was appended never reaches the remote tier."""
        position, expected = 0, self.base_offset
        while position < self.size:
            batch = next(self._headers(position, self.size))[1]
            data = self._pread(max(chunk_bytes, batch.size), position)
            headers = list(iter_headers(data))
            expected = self._check(data, position, headers, expected, trust=False)
            position += headers[-1][0] + headers[-1][1].size

    # -- startup checks -----------------------------------------------------------------------

    def truncate_to_offset(self, offset: int) -> None:
        """Cut the segment before the batch holding ``offset`` (nothing when it holds none), indexes
        rebuilt: a follower's copy cut back to where its leader's history diverged."""
        found = self.find_position(offset) if self.base_offset <= offset < self.next_offset else None
        if found is None:
            return
        try:
            os.ftruncate(self._fd, found[0])
        except OSError as exc:
            raise StorageError(f"cannot truncate segment {self.path}: {exc}") from exc
        self.recover()
        self.flush()

    def recover(self, truncate: bool = True) -> int:
        """Validate every batch from the start and cut the file at the first bad or torn one.

        A batch is good when its magic, length and CRC check out, its offsets continue the previous
        batch's (the first starts at the base offset) and its timestamp does not go back. Both
        indexes are rebuilt. Returns how many bytes were cut off. With ``truncate`` false (a rolled
        segment: it was fsynced whole, so damage is not a torn write) nothing is cut: damage raises
        CorruptRecordError naming the byte and offset instead.
        """
        self.offset_index.truncate_to(self.base_offset)
        self.time_index.truncate_to(self.base_offset)
        self._reset_state()
        file_size = os.fstat(self._fd).st_size
        valid_end = 0
        self._verified_end = 0
        try:
            for position, header in self._headers(0, file_size):
                where = f"{self.path} at byte {position}"
                intact = self._intact_or_kept(position, header, file_size, where)
                if header.base_offset != self.next_offset:
                    raise CorruptRecordError(f"{where}: batch offset {header.base_offset}, expected {self.next_offset}")
                if header.commit_timestamp < self.max_timestamp:
                    raise CorruptRecordError(
                        f"{where}: timestamp {header.commit_timestamp} goes back from {self.max_timestamp}"
                    )
                self._track(position, header)
                valid_end = position + header.size
                if intact:  # after a damaged batch kept, nothing continues the known-good prefix
                    self._extend_verified(position, valid_end)
        except CorruptRecordError as exc:
            if not truncate:
                raise CorruptRecordError(f"{exc.message} (offsets from {self.next_offset} on are damaged)") from None
            logger.warning("%s; truncating the segment at byte %d of %d", exc.message, valid_end, file_size)
        self.size = valid_end
        if valid_end < file_size:
            try:
                os.ftruncate(self._fd, valid_end)
            except OSError as exc:
                raise StorageError(f"cannot truncate segment {self.path}: {exc}") from exc
        return file_size - valid_end

    def _intact_or_kept(self, position: int, header: BatchHeader, file_size: int, where: str) -> bool:
        """Whether the batch's CRC checks out; False for a damaged batch recovery keeps (whole
        batches follow it); raises for one it must cut (a torn write at the tail)."""
        try:
            validate(self._pread(header.size, position), 0, where)
            return True
        except CorruptRecordError as exc:
            if not self._corrupt_but_not_torn(position, header, file_size):
                raise
            logger.error(
                "%s; whole batches follow it, so this is corruption, not a torn write: keeping it so "
                "later acknowledged records stay readable (reads of offsets %d..%d will fail)",
                exc.message,
                header.base_offset,
                header.last_offset,
            )
            return False

    def _corrupt_but_not_torn(self, position: int, header: BatchHeader, file_size: int) -> bool:
        """A torn write can only hit the tail; a bad batch followed by a good one is disk corruption."""
        after = position + header.size
        if header.base_offset != self.next_offset or after + HEADER_SIZE > file_size:
            return False
        following = read_header(self._pread(HEADER_SIZE, after))
        if following.base_offset != header.next_offset or after + following.size > file_size:
            return False
        try:
            validate(self._pread(following.size, after), 0, f"{self.path} at byte {after}")
        except CorruptRecordError:
            return False
        return True

    def sanity_check(self, truncate: bool = True) -> int:
        """Trust the indexes if they hold together and the last batch ends at the file's end;
        otherwise :meth:`recover` (with ``truncate``). Reads only the headers after the last index entry."""
        try:
            self._check_tail()
        except CorruptRecordError as exc:
            logger.warning("%s; rebuilding the segment's indexes", exc.message)
            return self.recover(truncate)
        return 0

    def quarantine(self) -> Path:
        """Set a damaged rolled segment aside, never cut: ``.log`` renamed to ``.log.quarantined``
        (an operator may salvage it), the indexes deleted (they are derived). Returns the new path."""
        self.close()
        self.offset_index.delete()
        self.time_index.delete()
        target = self.path.with_name(self.path.name + QUARANTINE_SUFFIX)
        try:
            os.replace(self.path, target)
        except OSError as exc:
            raise StorageError(f"cannot quarantine segment {self.path}: {exc}") from exc
        return target

    def _check_tail(self) -> None:
        self._reset_state()
        intact = self.offset_index.intact and self.time_index.intact
        empty = not self.offset_index.entries and not self.time_index.entries
        if intact and empty and self.size == 0:
            return
        last_entry = self.offset_index.last_entry()
        if not intact or last_entry is None or self.size == 0:
            broken = [index.path.name for index in (self.offset_index, self.time_index) if not index.intact]
            raise CorruptRecordError(
                f"{self.path}: index {' and '.join(broken) or self.offset_index.path.name} is missing, unreadable "
                "or does not match the log"
            )
        _, first = next(self._headers(0, self.size))
        if first.base_offset != self.base_offset or self.offset_index.entries[0] != (0, 0):
            raise CorruptRecordError(f"{self.path}: the first batch or its index entry is not at the base offset")
        self.first_timestamp = first.commit_timestamp
        expected, position = last_entry
        if any(entry_position >= self.size for _, entry_position in self.offset_index.entries):
            raise CorruptRecordError(f"{self.path}: the offset index points past the end of the log")
        for _, header in self._headers(position, self.size):
            if header.base_offset != expected:
                raise CorruptRecordError(f"{self.path}: batch offset {header.base_offset}, expected {expected}")
            expected = header.next_offset
            self._bytes_since_index_entry += header.size
            self.max_timestamp = max(self.max_timestamp, header.commit_timestamp)
        self.next_offset = expected
        if position and read_header(self._pread(HEADER_SIZE, position)).base_offset != last_entry[0]:
            raise CorruptRecordError(f"{self.path}: the last offset index entry does not point at its batch")
        time_entry = self.time_index.last_entry()
        if time_entry is None or time_entry[0] > self.max_timestamp or time_entry[1] >= self.next_offset:
            raise CorruptRecordError(f"{self.path}: the time index does not match the log")


def _write_all(fd: int, views: list[memoryview], position: int) -> int:
    """``views`` written back to back from ``position``, :data:`_IOV_MAX` buffers per call and
    again after a short write; the bytes written."""
    written = first = 0
    while first < len(views):
        done = os.pwritev(fd, views[first : first + _IOV_MAX], position + written)
        if not done:
            raise OSError(f"a write at byte {position + written} wrote nothing")
        written += done
        while first < len(views) and done >= len(views[first]):
            done -= len(views[first])
            first += 1
        if done:
            views[first] = views[first][done:]
    return written
