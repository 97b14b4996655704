"""One led bucket's remote log: its manifest, the reads served from it and the maintenance steps.

The manifest held here is the last one this server wrote or read, replaced whole (never mutated),
so readers on RPC threads take it without a lock while the remote log task changes it. The task
runs the steps in order, on one thread: :meth:`reconcile` (after a start or a failure, and
periodically: read the manifest, the truth, checked against the local checkpoint, and delete the
orphans), :meth:`upload`, :meth:`retain_local`, :meth:`expire`; an operator's :meth:`repair` runs
between passes. Storage is passed in rather than held, so the manager owns the one instance.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from typing import Iterator

from lakelog.errors import NotLeaderError, RemoteStorageError
from lakelog.human_size import human_size
from lakelog.fetch_info import RemoteLogFetchInfo, RemoteLogSegment
from lakelog.metadata import TableInfo
from lakelog.remote_fs import RemoteLocation
from lakelog.server.coordinator.table_properties import LOCAL_SEGMENTS, TTL, table_property
from lakelog.server.log.log_tablet import LogTablet
from lakelog.server.log.quarantine import QuarantinedRange
from lakelog.server.remote.manifest import MANIFEST_FILE, RemoteLogManifest, contiguous_run
from lakelog.server.remote.remote_checkpoint import RemoteCheckpoint
from lakelog.server.remote.remote_storage import RemoteLogStorage

logger = logging.getLogger(__name__)

MAX_FETCH_SEGMENTS = 16


@dataclass(frozen=True)
class TieringPolicy:
    """A table's tiering properties: local segments kept (the active one counted) and remote TTL."""

    local_segments: int
    ttl_ms: int
    lake_enabled: bool

    @classmethod
    def of(cls, info: TableInfo) -> TieringPolicy:
        where = f"table {info.path}"
        return cls(
            table_property(where, info.properties, LOCAL_SEGMENTS),
            table_property(where, info.properties, TTL),
            info.lake_enabled,
        )


class RemoteLogTablet:
    """The remote side of one :class:`LogTablet` led by this server."""

    def __init__(self, info: TableInfo, tablet: LogTablet, directory: RemoteLocation, next_due: float) -> None:
        self.info = info
        self.tablet = tablet
        self.directory = directory
        self.active = True  # cleared when the bucket is dropped or no longer led: the task stops
        self.reconcile_due = float("-inf")  # monotonic s of the next reconcile; -inf: the next pass
        self.failures = 0
        self.next_due = next_due
        self._manifest: RemoteLogManifest | None = None
        self.manifest_error: RemoteStorageError | None = None  # set while the manifest cannot be trusted
        # A quarantined range the manifest does not cover: nothing past it is uploaded (no gap remotely).
        self.upload_blocked_by: QuarantinedRange | None = None
        # The periodic check that the objects the manifest names are there: when it last ran, and
        # what it found missing (kept until a check finds them all again).
        self.objects_checked_at = float("-inf")
        self.objects_vanished: RemoteStorageError | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.tablet.name

    @property
    def _manifest_location(self) -> str:
        return self.directory.child(MANIFEST_FILE).uri

    # -- reads ----------------------------------------------------------------------------------

    @property
    def known_manifest(self) -> RemoteLogManifest:
        """The manifest as last read or written, without remote I/O (empty before the first read)."""
        manifest = self._manifest
        return manifest if manifest is not None else RemoteLogManifest()

    def manifest(self, storage: RemoteLogStorage) -> RemoteLogManifest:
        """The manifest, read from remote storage the first time (after a restart); raises
        RemoteStorageError while it is missing or damaged, so no reader skips the range silently."""
        manifest = self._manifest
        if manifest is None:
            with self._lock:
                if self._manifest is None:
                    self._manifest = self._read_manifest(storage)
                manifest = self._manifest
        return manifest

    def _read_manifest(self, storage: RemoteLogStorage, restore: bool = False) -> RemoteLogManifest:
        """The manifest in remote storage, checked against the local checkpoint; fails closed
        (RemoteStorageError naming the manifest, logged at ERROR once) when it cannot be trusted.
        With ``restore`` (the task's reconcile), a manifest a replaced leader wrote over the one
        this server wrote and still holds is written again instead (see :meth:`_written_over`)."""
        stored, problem = self._check_manifest(storage)
        if problem and restore and stored is not None and self._written_over(stored):
            known = self.known_manifest
            logger.warning(
                "%s: %s was written over in leader epoch %d by a replaced leader; this leader's (epoch %d, offsets [%d, %d)) is written again",
                self.name, self._manifest_location, stored.leader_epoch, known.leader_epoch, known.start_offset, known.end_offset,
            )
            return self._write_manifest(storage, known)
        if problem:
            error = RemoteStorageError(
                f"{problem}: its remote segments are neither read nor deleted until "
                f"`lakelog repair remote {self.info.path}` rebuilds it"
            )
            if self.manifest_error is None:
                logger.error("%s", error.message)
            self.manifest_error = error
            raise error
        self.manifest_error = None
        return stored if stored is not None else RemoteLogManifest()

    def _written_over(self, stored: RemoteLogManifest) -> bool:
        """Whether ``stored`` is a replaced leader's, written over the manifest this server wrote in
        its epoch and still holds: one that read the manifest just before this leader's first write
        can still write once (the fencing is a read, not a conditional write), and its list drops
        this leader's uploads."""
        known, epoch = self._manifest, self.tablet.epochs.latest_epoch
        return known is not None and epoch >= 0 and known.leader_epoch == epoch and stored.leader_epoch < epoch

    def _check_manifest(self, storage: RemoteLogStorage) -> tuple[RemoteLogManifest | None, str | None]:
        """The manifest (None if there is none or it is damaged) and what is wrong with it: damaged,
        missing although this server wrote one or segment files lie beside it, or older than the
        version or the leader epoch this server wrote."""
        data = storage.read_manifest(self.directory)
        try:
            manifest = self._parsed_manifest(data)
        except RemoteStorageError as damaged:
            return None, f"{damaged.message} ({self.name})"
        checkpoint = RemoteCheckpoint.load(self.tablet.directory)
        found = f"remote manifest {self._manifest_location} of {self.name}"
        if manifest is None and checkpoint is not None and checkpoint.version > 0:
            return None, f"{found} is missing, but this server wrote {checkpoint.describe()}"
        if manifest is None and checkpoint is None:
            segments = [item.name for item in storage.list_objects(self.directory) if item.is_dir]
            if segments:
                return None, f"{found} is missing, but {len(segments)} segment directories lie beside it"
        if manifest is not None and checkpoint is not None and manifest.version < checkpoint.version:
            return manifest, f"{found} is version {manifest.version}, older than the {checkpoint.describe()} this server wrote"
        if manifest is not None and checkpoint is not None and manifest.leader_epoch < checkpoint.leader_epoch:
            return manifest, (
                f"{found} was written in leader epoch {manifest.leader_epoch}, older than the {checkpoint.describe()} "
                "this server wrote: a replaced leader wrote over it"
            )
        return manifest, None

    def _parsed_manifest(self, data: bytes | None) -> RemoteLogManifest | None:
        """The manifest read as ``data`` (None: there is none); RemoteStorageError when it is damaged.
        The read stays the caller's, outside its handling of damage: storage that cannot be reached
        fails the caller, it does not make the manifest count as damaged."""
        return None if data is None else RemoteLogManifest.from_json(data, self._manifest_location)

    def _write_manifest(self, storage: RemoteLogStorage, manifest: RemoteLogManifest) -> RemoteLogManifest:
        """Write ``manifest`` under this server's leader epoch and make it current, unless the stored
        one was written in a newer epoch: then this server no longer leads the bucket, though no one
        told it yet (cut off from the coordinator), and writing would drop the new leader's uploads.
        Its version goes past the stored one's, whoever wrote that."""
        stored = self._fenced(storage)
        version = max(manifest.version, stored.version + 1) if stored is not None else manifest.version
        manifest = replace(manifest, version=version, leader_epoch=self.tablet.epochs.latest_epoch)
        storage.write_manifest(self.directory, manifest)
        self._publish(manifest)
        return manifest

    def _fenced(self, storage: RemoteLogStorage) -> RemoteLogManifest | None:
        """The manifest in storage as far as it can be read (a damaged one counts as none: it is
        written over, as :meth:`repair` does on purpose); NotLeaderError when it was written in a
        newer leader epoch than this server's."""
        data = storage.read_manifest(self.directory)
        try:
            stored = self._parsed_manifest(data)
        except RemoteStorageError:
            return None
        epoch = self.tablet.epochs.latest_epoch
        if stored is not None and stored.leader_epoch > epoch:
            raise NotLeaderError(
                f"{self.name}: {self._manifest_location} was written in leader epoch {stored.leader_epoch}, "
                f"newer than this server's {epoch}: a newer leader writes the bucket's remote log"
            )
        return stored

    def _publish(self, manifest: RemoteLogManifest) -> None:
        """Make a manifest the task read or wrote current and checkpoint its range locally. Under
        the lock, so a first read by a reader still in flight cannot land after it and bring back
        an older version."""
        if RemoteCheckpoint.of(manifest) != RemoteCheckpoint.load(self.tablet.directory):
            RemoteCheckpoint.of(manifest).save(self.tablet.directory)
        with self._lock:
            self._manifest = manifest

    def fetch_info(self, storage: RemoteLogStorage, offset: int) -> RemoteLogFetchInfo | None:
        """Where ``offset`` lives remotely, None if no remote segment holds it."""
        manifest = self.manifest(storage)
        index = manifest.index_of(offset)
        if index is None:
            return None
        segments = manifest.segments[index : index + MAX_FETCH_SEGMENTS]
        position = storage.offset_index(self.directory, segments[0]).position_of(offset)
        return RemoteLogFetchInfo(self.directory.uri, segments, position, self.info.partition_name)

    def lookup_offset_by_timestamp(self, storage: RemoteLogStorage, timestamp: int, below: int) -> int | None:
        """The first offset with a commit timestamp >= ``timestamp`` in the remote segments that start
        below ``below`` (the local log start: from there on the local log answers); None if none.
        The manifest's max timestamps pick the one segment whose dense time index is read."""
        for segment in self.manifest(storage).segments:
            if segment.start_offset >= below:
                break
            if segment.max_timestamp >= timestamp:
                return storage.time_index(self.directory, segment).offset_of(timestamp)
        return None

    # -- maintenance (the remote log task's thread only) ----------------------------------------

    def reconcile(self, storage: RemoteLogStorage, orphans_before_ms: int) -> list[str]:
        """Re-read the manifest and delete the files it does not name, last written before
        ``orphans_before_ms``: an upload whose manifest write failed or never happened (a crash),
        a replaced leader's upload, a segment expiry or a repair left behind. Below the
        manifest's end only when this server wrote it in its own leader epoch (or the bucket has
        no epochs): one an earlier leader wrote may not name everything that leader uploaded.
        Returns what was deleted."""
        manifest = self._read_manifest(storage, restore=True)
        self._publish(manifest)
        below_end = manifest.leader_epoch == self.tablet.epochs.latest_epoch
        orphans = storage.delete_orphans(self.directory, manifest, orphans_before_ms, below_end)
        if orphans:
            logger.info("%s deleted %d orphan remote files: %s", self.name, len(orphans), ", ".join(orphans))
        return orphans

    def repair(self, storage: RemoteLogStorage) -> str:
        """Rebuild the manifest from the segment files and their indexes (``lakelog repair remote``):
        the contiguous run of whole segments that reaches furthest; says what it wrote and skipped."""
        segments, skipped = [], []
        for found in storage.list_objects(self.directory):
            if found.is_dir:
                try:
                    segments.append(storage.segment_of(self.directory, found))
                except RemoteStorageError as error:
                    skipped.append(error.message)
        checkpoint = RemoteCheckpoint.load(self.tablet.directory)
        versions = [checkpoint.version if checkpoint else 0, self.known_manifest.version]
        manifest = self._write_manifest(storage, RemoteLogManifest(max(versions) + 1, contiguous_run(segments)))
        self.manifest_error = None
        self.reconcile_due = float("-inf")  # the next pass deletes, past the grace period, what the run left out
        summary = f"rebuilt {self._manifest_location} of {self.name}: {RemoteCheckpoint.of(manifest).describe()}"
        summary += f", {len(manifest.segments)} of {len(segments)} segments"
        if len(manifest.segments) < len(segments) or skipped:
            summary += " (what it leaves out goes as orphans once older than remote.log.orphan-grace)"
        if checkpoint is not None and manifest.end_offset < checkpoint.end_offset:
            summary += f"; WARNING: this server had uploaded up to offset {checkpoint.end_offset}"
        if skipped:
            summary += "; skipped: " + "; ".join(skipped)
        logger.warning("%s", summary)
        return summary

    def upload(self, storage: RemoteLogStorage) -> Iterator[RemoteLogSegment]:
        """Upload, oldest first, every rolled segment the manifest lacks, writing the manifest after
        each so one failure loses no earlier progress; yields each segment once it is in the
        manifest, so the caller counts progress even when a later one fails, and may stop early."""
        manifest = self.known_manifest
        high_watermark = self.tablet.high_watermark
        pending = []
        expected = manifest.end_offset if manifest.end_offset >= 0 else None
        # A damaged segment never uploaded: what follows it would leave a gap in remote storage.
        self.upload_blocked_by = next((hole for hole in self.tablet.quarantined if hole.end > manifest.end_offset), None)
        for segment in self.tablet.segments[:-1]:
            if segment.base_offset < manifest.end_offset or not 0 < segment.size or segment.next_offset > high_watermark:
                continue
            if self.upload_blocked_by is not None and segment.base_offset >= self.upload_blocked_by.start:
                break
            if expected is not None and segment.base_offset != expected:
                break  # a quarantined segment's hole: the manifest stays contiguous
            pending.append(segment)
            expected = segment.next_offset
        if pending:
            self._fenced(storage)  # before the uploads too: a replaced leader leaves no files behind
        for segment in pending:
            entry = storage.upload_segment(self.directory, segment)
            manifest = self._write_manifest(storage, manifest.appended(entry))
            logger.info(
                "uploaded %s segment [%d, %d) %s as %s",
                self.name, entry.start_offset, entry.end_offset, human_size(entry.size_in_bytes), entry.segment_id,
            )
            yield entry

    def retain_local(self, keep: int) -> int:
        """Delete local segments beyond the newest ``keep``, but only those whose records are all
        in the manifest: until then the local copy is the only one."""
        segments = self.tablet.segments
        if len(segments) <= keep:
            return 0
        cutoff = min(segments[-keep].base_offset, self.known_manifest.end_offset)
        return self.tablet.delete_segments_before(cutoff) if cutoff > 0 else 0

    def expire(self, storage: RemoteLogStorage, older_than_ms: int, upto_offset: int) -> int:
        """Drop the oldest remote segments whose newest record is older than ``older_than_ms`` and
        that end at or below ``upto_offset``: manifest first, then files, so a reader never gets a
        segment whose files are gone before the manifest says so. Local segments below the expired
        end go too: their records are past retention, and kept they would be uploaded again."""
        manifest = self.known_manifest
        count = 0
        for segment in manifest.segments:
            if segment.max_timestamp >= older_than_ms or segment.end_offset > upto_offset:
                break
            count += 1
        if not count:
            return 0
        expired = manifest.segments[:count]
        remaining = self._write_manifest(storage, manifest.without_oldest(count))
        self.tablet.delete_segments_before(expired[-1].end_offset)
        for segment in expired:
            storage.delete_segment(self.directory, segment.segment_id)
        logger.info(
            "%s expired %d remote segments [%d, %d); remote log now starts at %d",
            self.name, count, expired[0].start_offset, expired[-1].end_offset, remaining.start_offset,
        )
        return count
