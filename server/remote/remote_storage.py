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
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterable, Iterator, Mapping, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

from lakelog.config import Configuration
from lakelog.errors import RemoteStorageError
from lakelog.fetch_info import RemoteLogSegment, remote_segment_file
from lakelog.metadata import TableInfo, TablePath
from lakelog.record.batch import HEADER_SIZE, read_header
from lakelog.remote_fs import RemoteLocation, file_system
from lakelog.server.log.segment import LogSegment
from lakelog.server.remote.dense_index import DenseIndex, DenseIndexes, DenseOffsetIndex, DenseTimeIndex
from lakelog.server.remote.manifest import MANIFEST_FILE, RemoteLogManifest

UPLOAD_CHUNK_BYTES = 1 << 20
INDEX_CACHE_BYTES = 64 << 20

_Index = TypeVar("_Index", bound=DenseIndex)


@dataclass
class RemoteObject:
    """A top-level entry of a bucket's remote dir: a segment dir (``<segment_id>/<start>.log`` and
    its indexes) or a file (the manifest, a temporary manifest)."""

    name: str
    is_dir: bool
    start_offset: int | None = None
    sizes: dict[str, int] = field(default_factory=dict)
    newest_ms: int | None = None
    unknown_age: bool = False

    @property
    def suffixes(self) -> set[str]:
        return set(self.sizes)

    def add_file(self, relative: str, size: int | None, mtime: datetime | None) -> None:
        if mtime is None:
            self.unknown_age = True
        else:
            self.newest_ms = max(self.newest_ms or 0, int(mtime.timestamp() * 1000))
        stem, dot, suffix = relative.partition(".")
        if self.is_dir and stem.isdigit() and dot:
            self.start_offset = int(stem)
            self.sizes[f".{suffix}"] = size or 0

    def written_before(self, ms: int) -> bool:
        """True only when every file's age is known and older: an unknown age is never old enough."""
        return not self.unknown_age and self.newest_ms is not None and self.newest_ms < ms


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
        """An unpartitioned table's bucket dir, where operators (and tests) look for its files."""
        return self.table_dir(path, table_id).child(str(bucket))

    def log_dir(self, info: TableInfo) -> RemoteLocation:
        """The directory of a table's bucket dirs, or for a partition ``<table dir>/<name>-<partition id>``
        (partition names are checked safe as object keys when created)."""
        table = self.table_dir(info.path, info.table_id)
        return table if info.partition_id is None else table.child(f"{info.partition_name}-{info.partition_id}")

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
        segment.verify()  # a damaged batch is never copied to the remote tier
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

    def list_objects(self, tablet_dir: RemoteLocation) -> list[RemoteObject]:
        """Every top-level entry of a bucket's remote dir, segment dirs with the files under them."""
        with self._io("list", tablet_dir):
            entries = self._fs.get_file_info(pafs.FileSelector(tablet_dir.path, allow_not_found=True, recursive=True))
        objects: dict[str, RemoteObject] = {}
        for entry in entries:
            name, _, rest = entry.path[len(tablet_dir.path) + 1 :].partition("/")
            found = objects.setdefault(name, RemoteObject(name, is_dir=bool(rest) or entry.type == pafs.FileType.Directory))
            if entry.type == pafs.FileType.File:
                found.add_file(rest, entry.size, entry.mtime)
        return sorted(objects.values(), key=lambda o: o.name)

    def missing_objects(self, tablet_dir: RemoteLocation, manifest: RemoteLogManifest) -> list[str]:
        """What ``manifest`` names that remote storage no longer holds (the manifest itself, segments
        without their .log file), by one listing: a remote tier emptied behind the server's back,
        as an in-memory S3 restarted or a bucket cleaned by hand, is found before a reader needs it."""
        found = {item.name: item for item in self.list_objects(tablet_dir)}
        missing = [] if MANIFEST_FILE in found else [MANIFEST_FILE]
        return missing + [
            segment.segment_id
            for segment in manifest.segments
            if segment.segment_id not in found or ".log" not in found[segment.segment_id].suffixes
        ]

    def delete_orphans(
        self, tablet_dir: RemoteLocation, manifest: RemoteLogManifest, older_than_ms: int, below_end: bool
    ) -> list[str]:
        """Delete what the manifest does not name and was last written before ``older_than_ms`` (ms
        since the epoch), so an upload in flight or a manifest that lags its objects never costs
        data. Past the manifest's range that is an upload it never recorded or a temporary
        manifest. Below its end it is an upload the range covers under other segments (a retried
        upload, a replaced leader's), a segment expiry failed to delete or one a repair left out:
        deleted only when ``below_end``, since the manifest must then be known to name
        everything its writer uploaded. Returns the names deleted."""
        keep = {MANIFEST_FILE, *(segment.segment_id for segment in manifest.segments)}
        orphans = [
            found
            for found in self.list_objects(tablet_dir)
            if found.name not in keep
            and found.written_before(older_than_ms)
            and (not found.is_dir or below_end or (found.start_offset is not None and found.start_offset >= manifest.end_offset))
        ]
        for found in orphans:
            self._delete(tablet_dir.child(found.name), found.is_dir)
        return [found.name for found in orphans]

    def segment_of(self, tablet_dir: RemoteLocation, found: RemoteObject) -> RemoteLogSegment:
        """The manifest entry of an uploaded segment rebuilt from its files: the dense offset index
        locates its last batch, whose header gives the end offset; the time index its max timestamp."""
        where = f"{tablet_dir.uri}/{found.name}"
        if found.start_offset is None or not {".log", ".index", ".timeindex"} <= found.suffixes:
            raise RemoteStorageError(f"{where}: not a whole uploaded segment (has {sorted(found.suffixes) or 'no files'})")
        start = found.start_offset
        stub = RemoteLogSegment(found.name, start, start, -1, found.sizes[".log"])
        offsets, times = self.offset_index(tablet_dir, stub), self.time_index(tablet_dir, stub)
        entries = len(offsets)
        if not entries or entries != len(times) or offsets[0] != (0, 0):
            raise RemoteStorageError(f"{where}: its indexes do not describe a segment starting at offset {start}")
        last_offset, last_position = offsets[entries - 1]
        log_file = segment_file(tablet_dir, found.name, start, ".log")
        with self._io("read", log_file):
            with self._fs.open_input_file(log_file.path) as stream:
                raw = stream.read_at(HEADER_SIZE, last_position)
        header = read_header(raw) if len(raw) == HEADER_SIZE else None
        if header is None or header.base_offset != start + last_offset or last_position + header.size != stub.size_in_bytes:
            raise RemoteStorageError(f"{where}: the last batch its index names does not end the .log file")
        return RemoteLogSegment(found.name, start, header.next_offset, times[entries - 1][0], stub.size_in_bytes)

    def delete_log(self, info: TableInfo) -> None:
        """Delete a dropped table's remote log (its partitions' too), or one partition's."""
        self._delete(self.log_dir(info), directory=True)

    # -- manifest -------------------------------------------------------------------------------

    def read_manifest(self, tablet_dir: RemoteLocation) -> bytes | None:
        """The bucket's manifest as stored, None if there is none. Parsing is the caller's: a
        damaged manifest is a metadata problem to fail closed on, not an outage to retry."""
        return self._read(tablet_dir.child(MANIFEST_FILE))

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
