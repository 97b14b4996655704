"""One bucket's pass over the remote segments a FetchLog answer listed.

It turns downloaded segments into exactly what a local fetch gives: CRC-checked batches, the
scanner's projection applied here (remote segments hold batches as produced, not projected by the
server), no record before the fetch offset, and a bounded table per poll, so the fetcher advances
positions as for local data. Once the last listed segment is consumed the bucket goes back to the
server, at the offset where the reader stopped.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

import pyarrow as pa

from lakelog.errors import CorruptRecordError, LakelogError
from lakelog.record import batch as rb

from lakelog.client.scanner.batch_decoder import BatchDecoder, cut_short
from lakelog.client.scanner.remote_log_downloader import PieceDownload, RemoteLogDownloader
from lakelog.fetch_info import RemoteLogFetchInfo, RemoteLogSegment


class RemoteLogReader:
    tier = "remote"

    def __init__(
        self,
        fetch: RemoteLogFetchInfo,
        fetch_offset: int,
        downloader: RemoteLogDownloader,
        bucket: int,
        out_schema: pa.Schema,
        projection: Sequence[int] | None,
        where: str,
        high_watermark: int = -1,
    ) -> None:
        """``out_schema`` is the projected schema with the meta columns; ``projection`` the column
        indexes into the table schema (None: every column); ``where`` names the bucket in errors."""
        self.next_offset = fetch_offset
        self.high_watermark = high_watermark
        self._tablet_dir = fetch.remote_log_tablet_dir
        self._downloader = downloader
        self._bucket = bucket
        self._out_schema = out_schema
        self._projection = projection
        self._where = where
        starts = [fetch.first_start_pos] + [0] * (len(fetch.segments) - 1)
        # Segments (and where in each) not yet asked for; the first is asked for piece by piece.
        self._queued: deque[tuple[RemoteLogSegment, int]] = deque(zip(fetch.segments, starts))
        self._pieces: deque[PieceDownload] = deque()
        self._data: memoryview | None = None  # the bytes of the first piece, once read
        self._pos = 0  # where the next batch starts in them
        self._carry = bytearray()  # the start of a batch that runs on into the next piece
        self._error: LakelogError | None = None
        self._prefetch()

    @property
    def done(self) -> bool:
        """Every listed segment consumed: the next records come from the server."""
        return not self._pieces and not self._queued

    def ready(self) -> bool:
        """:meth:`read` will not wait: the piece to read next is downloaded (or failed)."""
        self._prefetch()
        return self._error is not None or (bool(self._pieces) and self._pieces[0].ready())

    def _prefetch(self) -> None:
        """Ask for the next pieces, in order, while fewer than ``prefetch_num`` are outstanding and
        the scanner's budget has room: pieces are reserved in the order they are consumed, so the
        budget held is always freed by reading on."""
        while self._queued and len(self._pieces) < self._downloader.prefetch_num:
            segment, position = self._queued[0]
            request = self._downloader.next_piece(self._tablet_dir, segment, position)
            download = self._downloader.try_download(request, self._where)
            if download is None:
                return
            self._pieces.append(download)
            if request.last or not request.length:
                self._queued.popleft()
            else:
                self._queued[0] = (segment, position + request.length)

    def read(self, max_bytes: int, max_records: int | None = None) -> pa.Table:
        """Records from :attr:`next_offset` on: downloaded batches up to about ``max_bytes`` (at least
        one) and at most ``max_records`` records (None: no limit; a batch cut short is read on from
        there next time), across segment ends; empty while the next piece is still downloading. Raises
        RemoteStorageError if a download failed, CorruptRecordError for a bad batch (its CRC is
        checked before its offsets are trusted); records read before the failure are returned first
        and the error comes with the next call, so a consumer gets every good record and its
        position stops exactly at the bad one."""
        if self._error is not None:
            raise self._error
        decoder = BatchDecoder(self._bucket, self._out_schema, self._projection)
        try:
            self._read_into(decoder, max(max_bytes, 1), max_records)
        except LakelogError as error:
            if not decoder:
                raise
            self._error = error
        return decoder.to_table()

    def _read_into(self, decoder: BatchDecoder, max_bytes: int, max_records: int | None) -> None:
        consumed = 0
        while consumed < max_bytes and self._pieces and self._pieces[0].ready():
            limit = None if max_records is None else max_records - decoder.rows
            if limit is not None and limit <= 0:
                return
            piece = self._pieces[0]
            if self._data is None:
                self._data, self._pos = memoryview(piece.result()).cast("B"), 0
            batch = self._next_batch(self._data)
            if batch is None:
                self._finish_piece(piece)
                continue
            buf, pos = batch
            where = f"{self._where} remote log segment {piece.request.segment.segment_id} ({piece.uri})"
            before = decoder.rows
            header = decoder.add(buf, pos, self.next_offset, where, limit)
            if cut_short(header, self.next_offset, decoder.rows - before):
                self.next_offset = max(self.next_offset, header.base_offset) + decoder.rows - before
                self._put_back(buf, pos)
                return
            consumed += header.size
            self.next_offset = max(self.next_offset, header.next_offset)

    def _next_batch(self, data: memoryview) -> tuple[memoryview | bytearray, int] | None:
        """The next whole batch as ``(buffer, position)``, unchecked (a short or bad one fails its
        validation); None when the piece holds no more. A batch cut by a piece end is copied
        together out of the two pieces, the only copy of the remote path."""
        if self._carry:
            self._pos = self._fill_carry(data, self._pos)
            if not self._carry_complete():
                return None
            whole, self._carry = self._carry, bytearray()
            return whole, 0
        rest = len(data) - self._pos
        if rest <= 0:
            return None
        size = rb.read_header(data, self._pos).size if rest >= rb.HEADER_SIZE else None
        if size is not None and size <= rest:
            pos = self._pos
            self._pos += max(size, rb.HEADER_SIZE)
            return data, pos
        self._carry = bytearray(data[self._pos :])
        self._pos = len(data)
        return None

    def _put_back(self, buf: memoryview | bytearray, pos: int) -> None:
        """The batch :meth:`_next_batch` gave as ``(buf, pos)`` is read again next time."""
        if isinstance(buf, bytearray):
            self._carry = buf
        else:
            self._pos = pos

    def _fill_carry(self, data: memoryview, pos: int) -> int:
        """Move bytes of ``data`` from ``pos`` into the carried batch until it is whole; the new position."""
        wanted = rb.HEADER_SIZE if len(self._carry) < rb.HEADER_SIZE else rb.read_header(self._carry).size
        take = min(max(wanted - len(self._carry), 0), len(data) - pos)
        self._carry += data[pos : pos + take]
        if len(self._carry) == rb.HEADER_SIZE and take:
            return self._fill_carry(data, pos + take)  # the header is whole: now the size is known
        return pos + take

    def _carry_complete(self) -> bool:
        return len(self._carry) >= rb.HEADER_SIZE and len(self._carry) >= rb.read_header(self._carry).size

    def _finish_piece(self, piece: PieceDownload) -> None:
        """The piece is consumed: free its budget and, after a segment's last piece, check that the
        segment gave every record it holds."""
        short = len(self._data or b"") < piece.request.length
        self._data = None
        self._pieces.popleft()
        piece.discard()
        if piece.request.last or short:
            self._finish_segment(piece)
        self._prefetch()

    def _finish_segment(self, piece: PieceDownload) -> None:
        segment = piece.request.segment
        where = f"{self._where} remote log segment {segment.segment_id} ({piece.uri})"
        if self._carry:
            carried, self._carry = self._carry, bytearray()
            rb.validate(carried, 0, where)  # raises: a batch cut short by the end of the object
        if self.next_offset < segment.end_offset:
            # Without this, a truncated object would send the bucket back to the server at an offset
            # the server answers with this same segment, forever.
            raise CorruptRecordError(
                f"{where}: records end at offset {self.next_offset}, but the segment holds offsets up to "
                f"{segment.end_offset - 1}"
            )
        # A short object: the pieces still asked for of it hold nothing more.
        while self._pieces and self._pieces[0].request.segment == segment:
            self._pieces.popleft().discard()
        if self._queued and self._queued[0][0] == segment:
            self._queued.popleft()

    def close(self) -> None:
        """Stop the downloads and free what they hold."""
        self._data = None
        for download in self._pieces:
            download.discard()
        self._pieces.clear()
        self._queued.clear()
