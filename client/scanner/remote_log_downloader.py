"""Reads remote log segments straight from remote storage into memory (Fluss's RemoteLogDownloader).

The client reads remote segments with its own file system and its own ``remote.fs.*`` settings, so
catching up on old data costs the tablet server nothing but metadata. The rest of a segment is
read in one GET (ranged only where the read starts mid-file, never a byte before the requested
start position), into an Arrow buffer the batches are then decoded from in place: no temp file,
no copy. Only a segment larger than ``max_get_bytes`` is read in several GETs. Every byte read
ahead is held against the scanner's :class:`ReadAheadBudget` until the reader has consumed it, and
at most ``prefetch_num`` GETs run at once per scanner.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Mapping

import pyarrow as pa
import pyarrow.fs as pafs

from lakelog.errors import RemoteStorageError
from lakelog.remote_fs import RemoteLocation, file_system

from lakelog.client.scanner.read_ahead_budget import ReadAheadBudget
from lakelog.fetch_info import RemoteLogSegment

# The smallest GET a segment is split into by default, however small the budget.
MIN_GET_BYTES = 1 << 20


@dataclass(frozen=True)
class PieceRequest:
    """Bytes ``[position, position + length)`` of ``segment``'s ``.log`` under ``tablet_dir``."""

    tablet_dir: str
    segment: RemoteLogSegment
    position: int
    length: int

    @property
    def last(self) -> bool:
        """The piece reaches the end of the segment."""
        return self.position + self.length >= self.segment.size_in_bytes


class PieceDownload:
    """One GET being read into memory; its bytes stay held against the budget until
    :meth:`discard` (consumed, or the read abandoned)."""

    def __init__(self, request: PieceRequest, uri: str, future: Future[pa.Buffer], budget: ReadAheadBudget) -> None:
        self.request = request
        self.uri = uri
        self._future = future
        self._budget = budget
        self._released = False

    def ready(self) -> bool:
        return self._future.done()

    def result(self) -> pa.Buffer:
        """The bytes read (fewer than asked when the object is shorter); raises the GET's RemoteStorageError."""
        return self._future.result()

    def discard(self) -> None:
        self._future.cancel()
        if not self._released:
            self._released = True
            self._budget.release(self.request.length)


class RemoteLogDownloader:
    """Downloads for one scanner, on a pool of ``prefetch_num`` threads made on first use."""

    def __init__(
        self,
        settings: Mapping[str, str],
        prefetch_num: int,
        budget: ReadAheadBudget,
        on_done: Callable[[], None] = lambda: None,
        max_get_bytes: int | None = None,
    ) -> None:
        """``settings`` are the client's ``remote.fs.*`` keys without the prefix; ``on_done`` is
        called, on a pool thread, after each GET ends, so a poll waiting for data wakes up;
        ``max_get_bytes`` (default: half the budget) splits larger segments into several GETs."""
        self.prefetch_num = max(prefetch_num, 1)
        self.budget = budget
        self.max_get_bytes = max(max_get_bytes or max(budget.limit // 2, MIN_GET_BYTES), 1)
        self._settings = dict(settings)
        self._on_done = on_done
        self._lock = threading.Lock()
        self._file_systems: dict[str, pafs.FileSystem] = {}
        self._bytes_read: dict[str, int] = {}
        self._gets: dict[str, int] = {}
        self._pool: ThreadPoolExecutor | None = None

    def bytes_read(self) -> dict[str, int]:
        """Bytes read from remote storage per remote segment id, since this downloader started."""
        with self._lock:
            return dict(self._bytes_read)

    def gets(self) -> dict[str, int]:
        """GET requests sent per remote segment id, since this downloader started."""
        with self._lock:
            return dict(self._gets)

    def next_piece(self, tablet_dir: str, segment: RemoteLogSegment, position: int) -> PieceRequest:
        """The next GET of ``segment`` from ``position``: the rest of it, or ``max_get_bytes``."""
        rest = max(segment.size_in_bytes - position, 0)
        return PieceRequest(tablet_dir, segment, position, min(rest, self.max_get_bytes))

    def try_download(self, request: PieceRequest, where: str) -> PieceDownload | None:
        """Start the GET of ``request`` if the budget has room for it (None otherwise); ``where``
        names the bucket in errors."""
        if not self.budget.try_reserve(request.length):
            return None
        location = RemoteLocation.parse(request.tablet_dir).child(request.segment.file(".log"))
        with self._lock:
            if self._pool is None:
                # Made on first use: most scanners never read a remote segment.
                self._pool = ThreadPoolExecutor(self.prefetch_num, thread_name_prefix="remote-log-download")
            future = self._pool.submit(self._get, location, request, where)
        future.add_done_callback(lambda _: self._on_done())
        return PieceDownload(request, location.uri, future, self.budget)

    def _file_system(self, location: RemoteLocation) -> pafs.FileSystem:
        with self._lock:
            fs = self._file_systems.get(location.scheme)
        if fs is None:
            fs = file_system(location, self._settings)
            with self._lock:
                fs = self._file_systems.setdefault(location.scheme, fs)
        return fs

    def _get(self, location: RemoteLocation, request: PieceRequest, where: str) -> pa.Buffer:
        segment = request.segment
        try:
            with self._file_system(location).open_input_file(location.path) as source:
                length = min(request.length, max(source.size() - request.position, 0))
                source.seek(request.position)
                data = source.read_buffer(length)  # an Arrow buffer, 64-byte aligned: decoded in place
        except (OSError, pa.ArrowException) as exc:
            raise RemoteStorageError(
                f"{where}: cannot read remote log segment {segment.segment_id} (offsets {segment.start_offset}.."
                f"{segment.end_offset - 1}) at {location.uri}: {exc}"
            ) from None
        with self._lock:
            self._bytes_read[segment.segment_id] = self._bytes_read.get(segment.segment_id, 0) + data.size
            self._gets[segment.segment_id] = self._gets.get(segment.segment_id, 0) + 1
        return data

    def close(self) -> None:
        """Stop queued GETs; a later download starts afresh."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
