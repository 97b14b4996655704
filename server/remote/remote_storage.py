"""Remote storage of one tablet server: segment files, manifests and dense indexes under
``remote.data.dir``, through a pyarrow file system.

Every pyarrow or S3 failure becomes a :class:`RemoteStorageError` naming the path, so callers deal
with one retriable error. Parsed indexes are cached (LRU, bounded in bytes): a fetch below the
local log start needs one to find ``first_start_pos`` and would otherwise GET it every time.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Mapping, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

from lakelog.config import Configuration
from lakelog.errors import RemoteStorageError
from lakelog.metadata import RemoteLogSegment, TablePath, remote_segment_file
from lakelog.remote_fs import RemoteLocation, file_system
from lakelog.server.log.segment import LogSegment
from lakelog.server.remote.dense_index import DenseIndex, DenseIndexes, DenseOffsetIndex, DenseTimeIndex
from lakelog.server.remote.manifest import MANIFEST_FILE, RemoteLogManifest

UPLOAD_CHUNK_BYTES = 1 << 20
INDEX_CACHE_BYTES = 64 << 20

_Index = TypeVar("_Index", bound=DenseIndex)


def segment_file(tablet_dir: RemoteLocation, segment_id: str, start_offset: int, suffix: str) -> RemoteLocation:
    return tablet_dir.child(remote_segment_file(segment_id, start_offset, suffix))


class RemoteLogStorage:
    """Reads and writes the remote layout described in :mod:`lakelog.server.remote`."""

    def __init__(self, root: RemoteLocation, settings: Mapping[str, str], index_cache_bytes: int = INDEX_CACHE_BYTES) -> None:
        self.root = root
        self.settings = dict(settings)
        self._fs = file_system(root, settings)
        self._cache: OrderedDict[str, DenseIndex] = OrderedDict()
        self._cache_bytes = 0
        self._cache_limit = index_cache_bytes
        self._cache_lock = threading.Lock()

    @classmethod
    def from_configuration(cls, conf: Configuration, data_dir: Path) -> RemoteLogStorage:
        """``remote.data.dir`` (default ``<data_dir>/remote``) with the ``remote.fs.*`` settings."""
        uri = conf.get("remote.data.dir") or str(data_dir / "remote")
        return cls(RemoteLocation.parse(uri), conf.with_prefix("remote.fs."))

    def table_dir(self, path: TablePath, table_id: int) -> RemoteLocation:
        return self.root.child("log", path.database, f"{path.table}-{table_id}")

    def tablet_dir(self, path: TablePath, table_id: int, bucket: int) -> RemoteLocation:
        return self.table_dir(path, table_id).child(str(bucket))

    # -- file operations ------------------------------------------------------------------------

    @contextmanager
    def _io(self, action: str, location: RemoteLocation) -> Iterator[None]:
        try:
            yield
        except (OSError, pa.ArrowException) as exc:
            raise RemoteStorageError(f"cannot {action} {location.uri}: {exc}") from None

    def _write(self, location: RemoteLocation, chunks: Iterable[bytes]) -> None:
        with self._io("write", location):
            if location.scheme == "file":
                self._fs.create_dir(location.path.rsplit("/", 1)[0], recursive=True)
            with self._fs.open_output_stream(location.path) as out:
                for chunk in chunks:
                    out.write(chunk)

    def _read(self, location: RemoteLocation) -> bytes | None:
        """The whole file, None if it does not exist."""
        with self._io("read", location):
            try:
                with self._fs.open_input_stream(location.path) as stream:
                    return stream.read()
            except FileNotFoundError:
                return None

    def _delete(self, location: RemoteLocation, directory: bool) -> None:
        with self._io("delete", location):
            try:
                (self._fs.delete_dir if directory else self._fs.delete_file)(location.path)
            except FileNotFoundError:
                pass
        with self._cache_lock:
            for uri in [uri for uri in self._cache if uri.startswith(f"{location.uri}/")]:
                self._cache_bytes -= len(self._cache.pop(uri).data)

    # -- segments -------------------------------------------------------------------------------

    def upload_segment(self, tablet_dir: RemoteLocation, segment: LogSegment) -> RemoteLogSegment:
        """Copy a rolled segment under a new id: its ``.log`` byte for byte, streamed in chunks,
        and dense indexes built from its batch headers. Nothing refers to the files until the
        caller puts the returned entry into the manifest."""
        segment_id = uuid.uuid4().hex
        start = segment.base_offset
        indexes = DenseIndexes.build(start, segment.iter_batches())
        offset_file = segment_file(tablet_dir, segment_id, start, ".index")
        time_file = segment_file(tablet_dir, segment_id, start, ".timeindex")
        self._write(offset_file, [indexes.offset_index])
        self._write(time_file, [indexes.time_index])
        self._write(segment_file(tablet_dir, segment_id, start, ".log"), segment.iter_chunks(UPLOAD_CHUNK_BYTES))
        self._remember(offset_file.uri, DenseOffsetIndex(indexes.offset_index, start, offset_file.uri))
        self._remember(time_file.uri, DenseTimeIndex(indexes.time_index, start, time_file.uri))
        return RemoteLogSegment(segment_id, start, segment.next_offset, indexes.max_timestamp, segment.size)

    def delete_segment(self, tablet_dir: RemoteLocation, segment_id: str) -> None:
        self._delete(tablet_dir.child(segment_id), directory=True)

    def delete_orphans(self, tablet_dir: RemoteLocation, manifest: RemoteLogManifest) -> list[str]:
        """Delete everything in the tablet dir the manifest does not name (segments whose upload the
        manifest never recorded, temporary manifests); returns the names deleted."""
        keep = {MANIFEST_FILE, *(segment.segment_id for segment in manifest.segments)}
        with self._io("list", tablet_dir):
            entries = self._fs.get_file_info(pafs.FileSelector(tablet_dir.path, allow_not_found=True))
        orphans = [entry for entry in entries if entry.base_name not in keep]
        for entry in orphans:
            self._delete(tablet_dir.child(entry.base_name), entry.type == pafs.FileType.Directory)
        return [entry.base_name for entry in orphans]

    def delete_table(self, path: TablePath, table_id: int) -> None:
        self._delete(self.table_dir(path, table_id), directory=True)

    # -- manifest -------------------------------------------------------------------------------

    def read_manifest(self, tablet_dir: RemoteLocation) -> RemoteLogManifest:
        """The bucket's manifest; an empty one (version 0) if none was ever written."""
        location = tablet_dir.child(MANIFEST_FILE)
        data = self._read(location)
        return RemoteLogManifest() if data is None else RemoteLogManifest.from_json(data, location.uri)

    def write_manifest(self, tablet_dir: RemoteLocation, manifest: RemoteLogManifest) -> None:
        """Replace the manifest atomically: on a local file system a temporary file renamed over it,
        on S3 one PUT of the whole object (objects appear whole)."""
        target = tablet_dir.child(MANIFEST_FILE)
        if target.scheme != "file":
            self._write(target, [manifest.to_json()])
            return
        temporary = tablet_dir.child(f"{MANIFEST_FILE}.{uuid.uuid4().hex}.tmp")
        self._write(temporary, [manifest.to_json()])
        with self._io("rename over", target):
            self._fs.move(temporary.path, target.path)

    # -- indexes --------------------------------------------------------------------------------

    def offset_index(self, tablet_dir: RemoteLocation, segment: RemoteLogSegment) -> DenseOffsetIndex:
        return self._index(segment_file(tablet_dir, segment.segment_id, segment.start_offset, ".index"), segment, DenseOffsetIndex)

    def time_index(self, tablet_dir: RemoteLocation, segment: RemoteLogSegment) -> DenseTimeIndex:
        return self._index(segment_file(tablet_dir, segment.segment_id, segment.start_offset, ".timeindex"), segment, DenseTimeIndex)

    def _index(self, location: RemoteLocation, segment: RemoteLogSegment, kind: type[_Index]) -> _Index:
        with self._cache_lock:
            cached = self._cache.get(location.uri)
            if cached is not None:
                self._cache.move_to_end(location.uri)
                return cached  # type: ignore[return-value]
        data = self._read(location)
        if data is None:
            raise RemoteStorageError(f"remote index {location.uri} does not exist")
        index = kind(data, segment.start_offset, location.uri)
        self._remember(location.uri, index)
        return index

    def _remember(self, uri: str, index: DenseIndex) -> None:
        with self._cache_lock:
            previous = self._cache.pop(uri, None)
            self._cache_bytes += len(index.data) - (len(previous.data) if previous else 0)
            self._cache[uri] = index
            while self._cache_bytes > self._cache_limit and len(self._cache) > 1:
                _, evicted = self._cache.popitem(last=False)
                self._cache_bytes -= len(evicted.data)
