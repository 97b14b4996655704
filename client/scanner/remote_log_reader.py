"""One bucket's pass over the remote segments a FetchLog answer listed.

It turns downloaded segments into exactly what a local fetch gives: CRC-checked batches, the
scanner's projection applied here (remote segments hold batches as produced, not projected by the
server), no record before the fetch offset, and a bounded table per poll, so the fetcher advances
positions as for local data. Once the last listed segment is consumed the bucket goes back to the
server, at the offset where the reader stopped.
"""

from __future__ import annotations

from collections import deque
from typing import BinaryIO, Sequence

import pyarrow as pa

from lakelog.errors import CorruptRecordError, LakelogError
from lakelog.record import batch as rb

from lakelog.client.scanner.batch_decoder import BatchDecoder
from lakelog.client.scanner.remote_log_downloader import RemoteLogDownloader, SegmentDownload
from lakelog.metadata import RemoteLogFetchInfo, RemoteLogSegment


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
        self._queued: deque[tuple[RemoteLogSegment, int]] = deque(zip(fetch.segments, starts))
        self._downloads: deque[SegmentDownload] = deque()
        self._file: BinaryIO | None = None
        self._error: LakelogError | None = None
        self._prefetch()

    @property
    def done(self) -> bool:
        """Every listed segment consumed: the next records come from the server."""
        return not self._downloads and not self._queued

    def ready(self) -> bool:
        """:meth:`read` will not wait: the segment to read next is downloaded (or failed)."""
        return self._error is not None or (bool(self._downloads) and self._downloads[0].ready())

    def _prefetch(self) -> None:
        while self._queued and len(self._downloads) < self._downloader.prefetch_num:
            segment, start_pos = self._queued.popleft()
            self._downloads.append(self._downloader.download(self._tablet_dir, segment, start_pos, self._where))

    def read(self, max_bytes: int) -> pa.Table:
        """Records from :attr:`next_offset` on: downloaded batches up to about ``max_bytes`` (at least
        one), across segment ends; empty while the next segment is still downloading. Raises
        RemoteStorageError if a download failed, CorruptRecordError for a bad batch; records read
        before the failure are returned first and the error comes with the next call, so a
        consumer gets every good record and its position stops exactly at the bad one."""
        if self._error is not None:
            raise self._error
        decoder = BatchDecoder(self._bucket, self._out_schema, self._projection)
        try:
            self._read_into(decoder, max(max_bytes, 1))
        except LakelogError as error:
            if not decoder:
                raise
            self._error = error
        return decoder.to_table()

    def _read_into(self, decoder: BatchDecoder, max_bytes: int) -> None:
        consumed = 0
        while consumed < max_bytes and self.ready():
            current = self._downloads[0]
            where = f"{self._where} remote log segment {current.segment.segment_id} ({current.uri})"
            if self._file is None:
                self._file = open(current.result(), "rb")
            raw = self._next_batch(self._file)
            if raw is None:
                self._finish_segment(current, where)
                continue
            header = decoder.add(raw, 0, self.next_offset, where)
            consumed += header.size
            self.next_offset = max(self.next_offset, header.next_offset)

    @staticmethod
    def _next_batch(file: BinaryIO) -> bytes | None:
        """The next whole batch's bytes (unchecked; a short one fails its validation), None at the end."""
        head = file.read(rb.HEADER_SIZE)
        if not head:
            return None
        if len(head) < rb.HEADER_SIZE:
            return head
        return head + file.read(max(rb.read_header(head).size - rb.HEADER_SIZE, 0))

    def _finish_segment(self, current: SegmentDownload, where: str) -> None:
        if self.next_offset < current.segment.end_offset:
            # Without this, a truncated object would send the bucket back to the server at an offset
            # the server answers with this same segment, forever.
            raise CorruptRecordError(
                f"{where}: records end at offset {self.next_offset}, but the segment holds offsets up to "
                f"{current.segment.end_offset - 1}"
            )
        self._close_file()
        self._downloads.popleft().discard()
        self._prefetch()

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def close(self) -> None:
        """Stop the downloads and delete their files."""
        self._close_file()
        for download in self._downloads:
            download.discard()
        self._downloads.clear()
        self._queued.clear()
