"""The remote log task of a tablet server: upload rolled segments, trim local ones, expire remote ones.

The tablet server's timer calls :meth:`RemoteLogManager.tick`; every led bucket is due once per
``remote.log.task-interval``, or later after failures (exponential backoff, so an outage costs a
few failed requests, not a storm). A failure touches only the remote tier and its bucket: local
produce and fetch never wait on remote storage, and local segments stay until their upload is in
the manifest. :meth:`RemoteLogManager.run_once` does one pass over every bucket now, whatever
the schedule: for tests and operators.

The manifest is the truth across restarts: a bucket's first pass re-reads it (failing closed when
it cannot be trusted, see :mod:`lakelog.server.remote`) and deletes the files past its range it does
not name, so a crash between an upload and its manifest write costs one re-upload under a new id,
and each segment is in the manifest exactly once.

An operator hears of remote storage trouble once per outage, not once per try: a bucket's first
failure is a WARNING and its recovery an INFO line with the count; a pass that hangs (every S3
request has a deadline, but a slow store can still hold a pass for long) is reported once at
WARNING by a watchdog after ``remote.log.stall-warning``, with the upload backlog. Every
``remote.log.manifest-check-interval`` a bucket's remote objects are listed against its manifest:
a remote tier whose objects vanished (an in-memory S3 restarted, a bucket emptied by hand) is
logged at ERROR, shown by ``describe_buckets`` and counted by the manifest-error metric, and the
bucket's uploads and local cleanup stop, since its local segments may now be the only copy.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from lakelog.config import OPTIONS, Configuration
from lakelog.errors import LakelogError, NotLeaderError, RemoteStorageError
from lakelog.human_size import human_size
from lakelog.fetch_info import RemoteLogFetchInfo
from lakelog.metadata import TableInfo
from lakelog.server.log.log_tablet import LogTablet, wall_clock_ms
from lakelog.server.remote.manifest import RemoteLogManifest
from lakelog.server.remote.remote_log_tablet import RemoteLogTablet, TieringPolicy
from lakelog.server.remote.remote_storage import RemoteLogStorage

logger = logging.getLogger(__name__)

LakeEndOffset = Callable[[int, int], "int | None"]
"""``lake_end_offset(table_id, bucket)``: the end (exclusive) of what a committed lake snapshot
holds of the bucket; None or -1 when the lake holds nothing."""

MAX_BACKOFF_MS = 600_000


@dataclass
class UploadBacklog:
    """Rolled local segments not yet uploaded: their bytes and count, and how long the oldest has
    waited (seconds since its last record)."""

    size_bytes: int = 0
    segments: int = 0
    age_s: float = 0.0

    def describe(self) -> str:
        return f"upload backlog {human_size(self.size_bytes)} in {self.segments} segment(s), oldest {self.age_s:.0f} s"


@dataclass
class _Step:
    """The bucket a pass works on and since when: what the watchdog looks at."""

    remote: RemoteLogTablet
    started: float
    warned: bool = False


@dataclass
class RemoteTaskReport:
    """What one pass did; ``errors`` holds one error per bucket whose pass failed."""

    uploaded: int = 0
    deleted_local: int = 0
    expired: int = 0
    orphans_deleted: int = 0
    errors: list[LakelogError] = field(default_factory=list)


class RemoteLogManager:
    """The remote tier of every bucket this server leads; thread-safe."""

    def __init__(
        self,
        storage: RemoteLogStorage,
        task_interval_ms: int,
        lake_end_offset: LakeEndOffset | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        monotonic: Callable[[], float] = time.monotonic,
        orphan_grace_ms: int = OPTIONS["remote.log.orphan-grace"].default,
        stall_warning_ms: int = OPTIONS["remote.log.stall-warning"].default,
        manifest_check_interval_ms: int = OPTIONS["remote.log.manifest-check-interval"].default,
    ) -> None:
        self.storage = storage
        self.stall_warning_ms = stall_warning_ms
        self.manifest_check_interval_ms = manifest_check_interval_ms
        self.task_interval_ms = task_interval_ms
        self.orphan_grace_ms = orphan_grace_ms
        # Orphans appear while a bucket is led too (a replaced leader's late upload), so each is
        # deleted at most this long after it became old enough.
        self.reconcile_interval_ms = max(orphan_grace_ms, manifest_check_interval_ms)
        self.lake_end_offset = lake_end_offset
        self.clock = clock  # ms since the epoch, what TTL compares with; public so tests can move it
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._pass_lock = threading.Lock()
        self._closed = threading.Event()
        self._tablets: dict[tuple[int, int], RemoteLogTablet] = {}
        self._dropped: list[TableInfo] = []
        self._dropped_due = 0.0
        self._step: _Step | None = None
        self._watchdog: threading.Thread | None = None

    @classmethod
    def from_configuration(
        cls, conf: Configuration, data_dir: Path, lake_end_offset: LakeEndOffset | None = None
    ) -> RemoteLogManager:
        return cls(
            RemoteLogStorage.from_configuration(conf, data_dir),
            conf.get("remote.log.task-interval"),
            lake_end_offset,
            orphan_grace_ms=conf.get("remote.log.orphan-grace"),
            stall_warning_ms=conf.get("remote.log.stall-warning"),
            manifest_check_interval_ms=conf.get("remote.log.manifest-check-interval"),
        )

    # -- leadership -----------------------------------------------------------------------------

    def lead(self, info: TableInfo, tablets: Sequence[LogTablet]) -> None:
        """The buckets of ``info`` this server leads now; others of the table are let go."""
        led = {tablet.bucket: tablet for tablet in tablets}
        due = self._monotonic() + self.task_interval_ms / 1000
        with self._lock:
            for key in [key for key in self._tablets if key[0] == info.physical_id and key[1] not in led]:
                self._tablets.pop(key).active = False
            for bucket, tablet in led.items():
                remote = self._tablets.get((info.physical_id, bucket))
                if remote is not None and remote.tablet is tablet:
                    remote.info = info
                else:
                    directory = self.storage.log_dir(info).child(str(bucket))
                    self._tablets[info.physical_id, bucket] = RemoteLogTablet(info, tablet, directory, due)

    def drop_table(self, table_id: int) -> None:
        """Forget a dropped table or partition (by its physical id); its remote files go at the start of the next pass (not here: an
        upload of the table may be in flight, and this runs on an RPC thread)."""
        with self._lock:
            dropped = [self._tablets.pop(key) for key in [key for key in self._tablets if key[0] == table_id]]
            if dropped:
                self._dropped.append(dropped[0].info)
        for remote in dropped:
            remote.active = False

    def tablet(self, table_id: int, bucket: int) -> RemoteLogTablet:
        with self._lock:
            remote = self._tablets.get((table_id, bucket))
        if remote is None:
            raise NotLeaderError(f"the remote log of table {table_id} bucket {bucket} is not led here")
        return remote

    # -- reads (RPC threads) --------------------------------------------------------------------

    def manifest(self, table_id: int, bucket: int) -> RemoteLogManifest:
        """The bucket's remote segments (read from remote storage once after a restart)."""
        return self.tablet(table_id, bucket).manifest(self.storage)

    def known_manifest(self, table_id: int, bucket: int) -> RemoteLogManifest:
        """The bucket's remote segments as last seen, without remote I/O; empty if not led here."""
        with self._lock:
            remote = self._tablets.get((table_id, bucket))
        return remote.known_manifest if remote else RemoteLogManifest()

    def fetch_info(self, table_id: int, bucket: int, offset: int) -> RemoteLogFetchInfo | None:
        return self.tablet(table_id, bucket).fetch_info(self.storage, offset)

    def lookup_offset_by_timestamp(self, table_id: int, bucket: int, timestamp: int, below: int) -> int | None:
        return self.tablet(table_id, bucket).lookup_offset_by_timestamp(self.storage, timestamp, below)

    def remote_error(self, table_id: int, bucket: int) -> str:
        """Why the bucket's remote tier cannot be trusted now (objects vanished, manifest missing or
        damaged), empty when it can or the bucket is not led here."""
        with self._lock:
            remote = self._tablets.get((table_id, bucket))
        error = remote.manifest_error if remote is not None else None
        return error.message if error is not None else ""

    def upload_backlog(self, table_id: int) -> UploadBacklog:
        """The table's rolled local segments that the remote tier does not hold yet (a metric)."""
        with self._lock:
            remotes = [remote for key, remote in self._tablets.items() if key[0] == table_id]
        backlog = UploadBacklog()
        oldest: int | None = None
        for remote in remotes:
            end = remote.known_manifest.end_offset
            for segment in remote.tablet.segments[:-1]:
                if segment.next_offset > end and segment.size:
                    backlog.size_bytes += segment.size
                    backlog.segments += 1
                    oldest = segment.max_timestamp if oldest is None else min(oldest, segment.max_timestamp)
        if oldest is not None:
            backlog.age_s = max(self.clock() - oldest, 0) / 1000
        return backlog

    def manifest_errors(self, table_id: int) -> int:
        """How many led buckets of a table have a manifest that is missing or damaged (a metric)."""
        with self._lock:
            return sum(1 for key, remote in self._tablets.items() if key[0] == table_id and remote.manifest_error)

    def uploads_blocked(self, table_id: int) -> int:
        """How many led buckets of a table stop uploading at a damaged segment never uploaded (a metric)."""
        with self._lock:
            return sum(1 for key, remote in self._tablets.items() if key[0] == table_id and remote.upload_blocked_by)

    def repair(self, table_id: int, bucket: int) -> str:
        """Rebuild a bucket's manifest from its remote files, between two passes of the task."""
        remote = self.tablet(table_id, bucket)
        with self._pass_lock:
            return remote.repair(self.storage)

    # -- the task -------------------------------------------------------------------------------

    def tick(self) -> None:
        """Run the buckets that are due; the tablet server's timer calls this (and so starts the
        watchdog, which must run beside the timer's thread: a stalled pass holds that one)."""
        if self._watchdog is None:
            self._watchdog = threading.Thread(target=self._watch, name="remote-log-watchdog", daemon=True)
            self._watchdog.start()
        now = self._monotonic()
        with self._lock:
            due = [remote for remote in self._tablets.values() if remote.next_due <= now]
            dropped = bool(self._dropped) and self._dropped_due <= now
        if due or dropped:
            self._run(due)

    def run_once(self) -> RemoteTaskReport:
        """One pass over every led bucket now, backoff and schedule ignored."""
        with self._lock:
            tablets = list(self._tablets.values())
        return self._run(tablets)

    def close(self) -> None:
        """Stop a running pass after the upload in flight."""
        self._closed.set()

    def _watch(self) -> None:
        """Say once when a bucket's pass has run past ``remote.log.stall-warning``."""
        while not self._closed.wait(min(self.stall_warning_ms / 1000, 1.0)):
            step = self._step
            if step is None or step.warned or self._monotonic() - step.started < self.stall_warning_ms / 1000:
                continue
            step.warned = True
            logger.warning(
                "remote log task of %s stalled: no answer from remote storage %s for %.0f s; local cleanup waits; %s",
                step.remote.name, self.storage.root.uri, self._monotonic() - step.started,
                self.upload_backlog(step.remote.info.physical_id).describe(),
            )

    def _run(self, tablets: list[RemoteLogTablet]) -> RemoteTaskReport:
        report = RemoteTaskReport()
        with self._pass_lock:
            self._delete_dropped(report)
            for remote in sorted(tablets, key=lambda r: (r.info.physical_id, r.tablet.bucket)):
                if self._closed.is_set():
                    break
                if remote.active:
                    self._run_bucket(remote, report)
        return report

    def _run_bucket(self, remote: RemoteLogTablet, report: RemoteTaskReport) -> None:
        step = self._step = _Step(remote, self._monotonic())
        try:
            self._run_bucket_steps(remote, report)
        finally:
            self._step = None
            if step.warned:
                logger.info("remote log task of %s moves again after a stall of %.0f s", remote.name, self._monotonic() - step.started)

    def _run_bucket_steps(self, remote: RemoteLogTablet, report: RemoteTaskReport) -> None:
        try:
            policy = TieringPolicy.of(remote.info)
            if not self._objects_present(remote):
                return
            if self._monotonic() >= remote.reconcile_due:
                report.orphans_deleted += len(remote.reconcile(self.storage, self.clock() - self.orphan_grace_ms))
                remote.reconcile_due = self._monotonic() + self.reconcile_interval_ms / 1000
            was_blocked = remote.upload_blocked_by
            for _ in remote.upload(self.storage):
                report.uploaded += 1
                if not remote.active or self._closed.is_set():
                    break
            if remote.upload_blocked_by is not None and was_blocked is None:
                logger.error(
                    "%s: uploads stop at offset %d: %s and was never uploaded, so segments past it would leave a "
                    "gap in remote storage; local segments past it are kept",
                    remote.name, remote.upload_blocked_by.start, remote.upload_blocked_by.describe(remote.name),
                )
            report.deleted_local += remote.retain_local(policy.local_segments)
            older_than = self.clock() - policy.ttl_ms
            report.expired += remote.expire(self.storage, older_than, self._expiry_bound(remote, policy))
        except LakelogError as error:
            remote.reconcile_due = float("-inf")  # what the failed step left behind is known only to storage
            remote.failures += 1
            delay_ms = min(self.task_interval_ms * 2 ** min(remote.failures - 1, 20), max(self.task_interval_ms, MAX_BACKOFF_MS))
            remote.next_due = self._monotonic() + delay_ms / 1000
            report.errors.append(error)
            logger.log(
                logging.WARNING if remote.failures == 1 else logging.DEBUG,
                "remote log task of %s failed (%d in a row, next try in %.0fs; said once per outage): %s",
                remote.name, remote.failures, delay_ms / 1000, error,
            )
        else:
            if remote.failures:
                logger.info("remote log task of %s works again after %d failed tries", remote.name, remote.failures)
            remote.failures = 0
            remote.next_due = self._monotonic() + self.task_interval_ms / 1000

    def _objects_present(self, remote: RemoteLogTablet) -> bool:
        """Every ``remote.log.manifest-check-interval`` (every pass while they are missing): are the
        objects the manifest names still there? False, logged once at ERROR, when some vanished."""
        manifest = remote.known_manifest
        now = self._monotonic()
        vanished = remote.objects_vanished is not None
        if not manifest.segments or (not vanished and now - remote.objects_checked_at < self.manifest_check_interval_ms / 1000):
            return True
        missing = self.storage.missing_objects(remote.directory, manifest)
        remote.objects_checked_at = now
        if not missing:
            if vanished:
                remote.objects_vanished = remote.manifest_error = None
                logger.info("the remote tier of %s holds every object its manifest names again", remote.name)
            return True
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        error = RemoteStorageError(
            f"the remote tier of {remote.name} lost {len(missing)} of the {len(manifest.segments) + 1} objects its manifest "
            f"names under {remote.directory.uri} ({shown}): offsets [{manifest.start_offset}, {manifest.end_offset}) "
            f"cannot be read from it; uploads and local cleanup of the bucket stop until "
            f"`lakelog repair remote {remote.info.path}` or the objects are back"
        )
        if not vanished and remote.manifest_error is None:  # else said already, by this check or a manifest read
            logger.error("%s", error.message)
        remote.objects_vanished = remote.manifest_error = error
        return False

    def _expiry_bound(self, remote: RemoteLogTablet, policy: TieringPolicy) -> int:
        """The offset TTL may delete up to: anything for a plain table; for a lake-enabled table
        only what a committed lake snapshot holds, so no offset becomes unreadable (docs/contract.md, "Tiers")."""
        if not policy.lake_enabled:
            return sys.maxsize
        end = self.lake_end_offset(remote.info.physical_id, remote.tablet.bucket) if self.lake_end_offset else None
        return -1 if end is None else end

    def _delete_dropped(self, report: RemoteTaskReport) -> None:
        with self._lock:
            dropped, self._dropped = self._dropped, []
        for index, info in enumerate(dropped):
            try:
                self.storage.delete_log(info)
                logger.info("deleted the remote log of dropped %s (id %d)", info.label, info.physical_id)
            except LakelogError as error:
                logger.warning("cannot delete the remote log of dropped %s yet: %s", info.label, error)
                report.errors.append(error)
                with self._lock:
                    self._dropped.extend(dropped[index:])
                    self._dropped_due = self._monotonic() + self.task_interval_ms / 1000
                return
