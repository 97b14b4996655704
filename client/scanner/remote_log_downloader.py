"""Copies remote log segments straight from remote storage to local temp files (Fluss's
RemoteLogDownloader).

The client reads remote segments with its own file system and its own ``remote.fs.*`` settings, so
catching up on old data costs the tablet server nothing but metadata. A segment streams in ranged
chunks to a temp file, so memory stays bounded whatever a segment's size, and never a byte before
the requested start position is read. A small thread pool downloads the next segments while the
caller consumes the current one.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Mapping

import pyarrow as pa
import pyarrow.fs as pafs

from lakelog.errors import RemoteStorageError
from lakelog.remote_fs import RemoteLocation, file_system

from lakelog.metadata import RemoteLogSegment

CHUNK_BYTES = 4 << 20


class SegmentDownload:
    """One segment being copied to a local file. ``discard()`` stops the copy and deletes the file,
    whether the copy is queued, running or done."""

    def __init__(self, segment: RemoteLogSegment, uri: str, future: Future[Path], cancelled: threading.Event) -> None:
        self.segment = segment
        self.uri = uri
        self._future = future
        self._cancelled = cancelled

    def ready(self) -> bool:
        return self._future.done()

    def result(self) -> Path:
        """The local file; raises the copy's RemoteStorageError."""
        return self._future.result()

    def discard(self) -> None:
        self._cancelled.set()
        if not self._future.cancel():
            # Runs once the copy has stopped, so the file is never deleted under a running writer.
            self._future.add_done_callback(_delete_result)


def _delete_result(future: Future[Path]) -> None:
    if future.exception() is None:
        future.result().unlink(missing_ok=True)


class RemoteLogDownloader:
    """Downloads for one scanner; its temp directory goes on :meth:`close` (or when collected)."""

    def __init__(
        self,
        settings: Mapping[str, str],
        prefetch_num: int,
        on_done: Callable[[], None] = lambda: None,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        """``settings`` are the client's ``remote.fs.*`` keys without the prefix; ``on_done`` is
        called, on a pool thread, after each copy ends, so a poll waiting for data wakes up."""
        self.prefetch_num = max(prefetch_num, 1)
        self._settings = dict(settings)
        self._on_done = on_done
        self._chunk_bytes = chunk_bytes
        self._lock = threading.Lock()
        self._file_systems: dict[str, pafs.FileSystem] = {}
        self._bytes_read: dict[str, int] = {}
        self._names = itertools.count()
        self._pool: ThreadPoolExecutor | None = None
        self._directory: Path | None = None
        self._remove_directory: weakref.finalize | None = None

    def bytes_read(self) -> dict[str, int]:
        """Bytes read from remote storage per remote segment id, since this downloader started."""
        with self._lock:
            return dict(self._bytes_read)

    def download(self, tablet_dir: str, segment: RemoteLogSegment, start_pos: int, where: str) -> SegmentDownload:
        """Start copying ``segment``'s ``.log`` from byte ``start_pos`` to its end; ``where`` names
        the bucket in errors."""
        location = RemoteLocation.parse(tablet_dir).child(segment.file(".log"))
        with self._lock:
            if self._pool is None or self._directory is None:
                # Made on first use: most scanners never read a remote segment.
                self._directory = Path(tempfile.mkdtemp(prefix="lakelog-remote-log-"))
                self._remove_directory = weakref.finalize(self, shutil.rmtree, self._directory, True)
                self._pool = ThreadPoolExecutor(self.prefetch_num, thread_name_prefix="remote-log-download")
            local = self._directory / f"{next(self._names)}-{segment.segment_id}.log"
            cancelled = threading.Event()
            future = self._pool.submit(self._copy, location, segment, start_pos, local, cancelled, where)
        future.add_done_callback(lambda _: self._on_done())
        return SegmentDownload(segment, location.uri, future, cancelled)

    def _file_system(self, location: RemoteLocation) -> pafs.FileSystem:
        with self._lock:
            fs = self._file_systems.get(location.scheme)
        if fs is None:
            fs = file_system(location, self._settings)
            with self._lock:
                fs = self._file_systems.setdefault(location.scheme, fs)
        return fs

    def _copy(
        self,
        location: RemoteLocation,
        segment: RemoteLogSegment,
        start_pos: int,
        local: Path,
        cancelled: threading.Event,
        where: str,
    ) -> Path:
        try:
            source_fs = self._file_system(location)
            with source_fs.open_input_file(location.path) as source, open(local, "wb") as sink:
                position, end = start_pos, source.size()
                while position < end and not cancelled.is_set():
                    chunk = source.read_at(min(self._chunk_bytes, end - position), position)
                    if not chunk:
                        break  # the object shrank under us; the reader reports the missing records
                    sink.write(chunk)
                    position += len(chunk)
                    with self._lock:
                        self._bytes_read[segment.segment_id] = self._bytes_read.get(segment.segment_id, 0) + len(chunk)
        except (OSError, pa.ArrowException) as exc:
            local.unlink(missing_ok=True)
            raise RemoteStorageError(
                f"{where}: cannot read remote log segment {segment.segment_id} (offsets {segment.start_offset}.."
                f"{segment.end_offset - 1}) at {location.uri}: {exc}"
            ) from None
        if cancelled.is_set():
            local.unlink(missing_ok=True)
        return local

    def close(self) -> None:
        """Stop queued copies and delete the temp directory; a later download starts afresh."""
        with self._lock:
            pool, self._pool = self._pool, None
            remove, self._remove_directory = self._remove_directory, None
            self._directory = None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        if remove is not None:
            remove()
