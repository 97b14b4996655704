"""The remote log tier's parts on real files (``file://`` storage), without a server: dense indexes
against the local segment they describe, the manifest, and the task's schedule and backoff."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pytest

from lakelog.errors import NotLeaderError, RemoteStorageError
from lakelog.metadata import TableInfo, TablePath
from lakelog.record.batch import encode_batch
from lakelog.remote_fs import RemoteLocation
from lakelog.server.log.log_tablet import LogConfig, LogTablet
from lakelog.server.remote.dense_index import DenseIndexes, DenseOffsetIndex, DenseTimeIndex
from lakelog.fetch_info import RemoteLogSegment
from lakelog.server.remote.manifest import RemoteLogManifest
from lakelog.server.remote.remote_log_manager import RemoteLogManager
from lakelog.server.remote.remote_storage import RemoteLogStorage

SCHEMA = pa.schema([("id", pa.int64())])
INTERVAL_MS = 10_000


class Clock:
    """Settable milliseconds for commit timestamps; ``seconds()`` is the task's monotonic view."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now

    def seconds(self) -> float:
        return self.now / 1000


@pytest.fixture
def clock() -> Clock:
    return Clock()


def open_log(directory: Path, clock: Clock) -> LogTablet:
    return LogTablet.open(directory, LogConfig(segment_max_bytes=10_000, index_interval_bytes=3000), 0, "shop.orders bucket 0", clock=clock)


def append_segments(log: LogTablet, clock: Clock, segments: int) -> None:
    """``segments`` rolled segments of 10 batches (of 1..3 rows), 10 ms apart, after what ``log`` holds."""
    first = log.log_end_offset
    for _ in range(segments):
        for batch in range(10):
            rows = 1 + batch % 3
            log.append(encode_batch(pa.record_batch({"id": pa.array(range(first, first + rows), pa.int64())}), 1))
            first += rows
            clock.now += 10
        log.roll()


@pytest.fixture
def tablet(tmp_path: Path, clock: Clock) -> Iterator[LogTablet]:
    """A bucket log with 5 rolled segments of 10 batches (of 1..3 rows), 10 ms apart."""
    log = open_log(tmp_path / "log", clock)
    append_segments(log, clock, 5)
    yield log
    log.close()


def manager_for(tmp_path: Path, tablet: LogTablet, clock: Clock, storage_class: type[RemoteLogStorage] = RemoteLogStorage) -> RemoteLogManager:
    storage = storage_class(RemoteLocation.parse((tmp_path / "remote").as_uri()), {})
    manager = RemoteLogManager(storage, INTERVAL_MS, clock=clock, monotonic=clock.seconds)
    manager.lead(TableInfo(7, TablePath("shop", "orders"), SCHEMA, 1, 1, {}), [tablet])
    return manager


def test_dense_indexes_locate_every_offset_and_timestamp_exactly(tablet: LogTablet) -> None:
    segment = tablet.segments[1]
    batches = list(segment.iter_batches())
    built = DenseIndexes.build(segment.base_offset, batches)
    offsets = DenseOffsetIndex(built.offset_index, segment.base_offset, "test")
    times = DenseTimeIndex(built.time_index, segment.base_offset, "test")
    assert len(offsets) == len(times) == len(batches) == 10
    assert built.max_timestamp == segment.max_timestamp
    assert b"".join(segment.iter_chunks(777)) == segment.path.read_bytes()
    for position, header in batches:
        for offset in range(header.base_offset, header.next_offset):
            assert offsets.position_of(offset) == position
        assert times.offset_of(header.commit_timestamp) == header.base_offset
        assert times.offset_of(header.commit_timestamp - 1) == header.base_offset
    assert times.offset_of(segment.max_timestamp + 1) is None
    with pytest.raises(RemoteStorageError, match="whole number"):
        DenseOffsetIndex(built.offset_index[:-1], segment.base_offset, "torn.index")


def test_manifest_round_trips_and_finds_the_segment_of_an_offset() -> None:
    manifest = RemoteLogManifest().appended(RemoteLogSegment("a", 0, 10, 5, 100)).appended(RemoteLogSegment("b", 10, 25, 9, 200))
    assert RemoteLogManifest.from_json(manifest.to_json(), "m") == manifest
    assert (manifest.version, manifest.start_offset, manifest.end_offset) == (2, 0, 25)
    assert [manifest.index_of(o) for o in (-1, 0, 9, 10, 24, 25)] == [None, 0, 0, 1, 1, None]
    assert manifest.without_oldest(1).segments == manifest.segments[1:]
    assert (RemoteLogManifest().start_offset, RemoteLogManifest().end_offset) == (-1, -1)
    with pytest.raises(RemoteStorageError, match="not a remote log manifest"):
        RemoteLogManifest.from_json(b'{"version": 1}', "m")
    stamped = RemoteLogManifest(3, manifest.segments, leader_epoch=4)
    assert RemoteLogManifest.from_json(stamped.to_json(), "m") == stamped
    assert stamped.appended(RemoteLogSegment("c", 25, 30, 9, 50)).leader_epoch == 4
    assert RemoteLogManifest.from_json(b'{"version": 1, "segments": []}', "m").leader_epoch == -1  # written before epochs


def test_a_leader_cut_off_from_the_coordinator_leaves_a_newer_leaders_manifest_alone(tmp_path: Path, tablet: LogTablet, clock: Clock) -> None:
    """The old leader uploaded in epoch 1; a new one took over in epoch 2 and uploaded more; the old
    one, never told, rolls a segment of its own. Written, its manifest would drop the new leader's
    upload (whose local copy may be gone): its pass fails naming the newer epoch instead."""
    tablet.epochs.assign(1, 0)
    old = manager_for(tmp_path, tablet, clock)
    assert not old.run_once().errors and old.manifest(7, 0).leader_epoch == 1
    copy = open_log(tmp_path / "copy", clock)
    append_segments(copy, clock, 5)
    copy.epochs.assign(1, 0)
    copy.epochs.assign(2, copy.log_end_offset)
    append_segments(copy, clock, 1)
    new = manager_for(tmp_path, copy, clock)
    assert not new.run_once().errors
    written = new.manifest(7, 0)
    assert (written.leader_epoch, written.end_offset) == (2, copy.log_end_offset)

    remote = new.tablet(7, 0)
    files = {item.name for item in new.storage.list_objects(remote.directory)}
    append_segments(tablet, clock, 1)
    report = old.run_once()
    assert [type(error) for error in report.errors] == [NotLeaderError]
    assert "leader epoch 2, newer than this server's 1" in str(report.errors[0])
    assert RemoteLogManifest.from_json(new.storage.read_manifest(remote.directory) or b"", "m") == written
    assert {item.name for item in new.storage.list_objects(remote.directory)} == files, "nothing uploaded either"
    copy.close()


def test_a_manifest_that_cannot_be_read_fences_the_upload_as_a_newer_leaders_would(tmp_path: Path, tablet: LogTablet, clock: Clock) -> None:
    """Storage that does not answer the read before an upload is an outage, not a missing or
    damaged manifest (which the write may replace): the pass fails and neither uploads a segment
    nor writes a manifest, since the one it cannot read may be a newer leader's."""

    class ReadsFail(RemoteLogStorage):
        down = False

        def read_manifest(self, tablet_dir: RemoteLocation) -> bytes | None:
            if self.down:
                raise RemoteStorageError("read refused")
            return super().read_manifest(tablet_dir)

    tablet.epochs.assign(1, 0)
    manager = manager_for(tmp_path, tablet, clock, ReadsFail)
    assert not manager.run_once().errors
    remote = manager.tablet(7, 0)
    written = manager.storage.read_manifest(remote.directory)
    files = {item.name for item in manager.storage.list_objects(remote.directory)}
    append_segments(tablet, clock, 1)
    manager.storage.down = True
    report = manager.run_once()
    manager.storage.down = False
    assert [str(error) for error in report.errors] == ["read refused"]
    assert manager.storage.read_manifest(remote.directory) == written
    assert {item.name for item in manager.storage.list_objects(remote.directory)} == files, "nothing uploaded"


def test_tick_runs_a_bucket_once_per_interval_and_backs_off_after_failures(tmp_path: Path, tablet: LogTablet, clock: Clock) -> None:
    class Flaky(RemoteLogStorage):
        down = True

        def read_manifest(self, tablet_dir: RemoteLocation) -> RemoteLogManifest:
            if self.down:
                raise RemoteStorageError("down")
            return super().read_manifest(tablet_dir)

    manager = manager_for(tmp_path, tablet, clock, Flaky)
    remote = manager.tablet(7, 0)
    manager.tick()
    assert remote.failures == 0 and remote.reconcile_due == float("-inf")  # not due yet: nothing ran
    delays = []
    for _ in range(4):
        clock.now += 10 * INTERVAL_MS * 2 ** len(delays)
        manager.tick()
        delays.append(round(remote.next_due - clock.seconds()))
    assert remote.failures == 4 and delays == [10, 20, 40, 80]
    clock.now += 30_000
    manager.tick()
    assert remote.failures == 4  # still backing off
    manager.storage.down = False  # type: ignore[attr-defined]
    clock.now += 60_000
    manager.tick()
    assert remote.failures == 0 and manager.manifest(7, 0).end_offset == tablet.segments[-1].base_offset
    assert len(tablet.segments) == 2 and round(remote.next_due - clock.seconds()) == INTERVAL_MS // 1000


def test_local_retention_follows_the_property_and_drop_deletes_remote_files(tmp_path: Path, tablet: LogTablet, clock: Clock) -> None:
    manager = manager_for(tmp_path, tablet, clock)
    info = TableInfo(7, TablePath("shop", "orders"), SCHEMA, 1, 1, {"table.log.tiered.local-segments": "4"})
    manager.lead(info, [tablet])
    report = manager.run_once()
    assert (report.uploaded, report.deleted_local, len(tablet.segments)) == (5, 2, 4)
    table_dir = tmp_path / "remote" / "log" / "shop" / "orders-7"
    assert len(list((table_dir / "0").iterdir())) == 6
    manager.drop_table(7)
    assert manager.run_once().errors == [] and not table_dir.exists()


def plant_orphan(manager: RemoteLogManager, name: str, start_offset: int, written_ms: int) -> None:
    """A segment dir no manifest names, holding a copy of the first uploaded segment's files."""
    remote = manager.tablet(7, 0)
    first = manager.manifest(7, 0).segments[0]
    source, target = Path(remote.directory.path) / first.segment_id, Path(remote.directory.path) / name
    target.mkdir()
    for file in source.iterdir():
        copied = target / f"{start_offset:020d}{file.suffix}"
        copied.write_bytes(file.read_bytes())
        os.utime(copied, (written_ms / 1000, written_ms / 1000))


def remote_names(manager: RemoteLogManager) -> set[str]:
    return {item.name for item in manager.storage.list_objects(manager.tablet(7, 0).directory)}


def test_orphans_below_the_manifest_end_go_once_this_leader_wrote_the_manifest_and_each_reconcile_comes_round(
    tmp_path: Path, tablet: LogTablet, clock: Clock
) -> None:
    """A manifest from an earlier leadership may not name all its leader uploaded, so only orphans
    past its end go; once this leader wrote one in its own epoch, the orphans inside the range go
    too, at the next reconcile the task runs by itself (no restart, no failure)."""
    tablet.epochs.assign(1, 0)
    manager = manager_for(tmp_path, tablet, clock)
    assert not manager.run_once().errors
    written = manager.manifest(7, 0)
    old = clock.now - manager.orphan_grace_ms - 1_000
    plant_orphan(manager, "retried", written.segments[1].start_offset, old)
    plant_orphan(manager, "unrecorded", written.end_offset, old)
    plant_orphan(manager, "young", written.segments[2].start_offset, clock.now)
    named = {"manifest.json", *(segment.segment_id for segment in written.segments)}
    assert remote_names(manager) == named | {"retried", "unrecorded", "young"}

    tablet.epochs.assign(2, tablet.log_end_offset)  # led again, in a new epoch: the stored manifest is epoch 1's
    manager.tablet(7, 0).reconcile_due = float("-inf")
    report = manager.run_once()
    assert (report.errors, report.orphans_deleted) == ([], 1)
    assert remote_names(manager) == named | {"retried", "young"}

    append_segments(tablet, clock, 1)
    assert manager.run_once().uploaded == 1 and manager.manifest(7, 0).leader_epoch == 2
    clock.now += manager.reconcile_interval_ms  # "young" is past the grace period now, and a reconcile is due
    report = manager.run_once()
    assert (report.errors, report.orphans_deleted) == ([], 2)
    assert remote_names(manager) == {"manifest.json", *(segment.segment_id for segment in manager.manifest(7, 0).segments)}


def test_a_replaced_leaders_manifest_written_over_this_leaders_is_written_again(
    tmp_path: Path, tablet: LogTablet, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """The replaced leader read the manifest just before this leader's write and wrote its own
    after it: the next reconcile puts this leader's list back (a version past the stored one), so
    the segments the other list dropped stay readable and are not taken for orphans."""
    tablet.epochs.assign(2, 0)
    manager = manager_for(tmp_path, tablet, clock)
    assert not manager.run_once().errors
    ours = manager.manifest(7, 0)
    remote = manager.tablet(7, 0)
    theirs = RemoteLogManifest(ours.version + 3, ours.segments[:2], leader_epoch=1)
    manager.storage.write_manifest(remote.directory, theirs)

    remote.reconcile_due = float("-inf")
    clock.now += 2 * manager.orphan_grace_ms  # what the other list dropped is old enough to be an orphan
    with caplog.at_level(logging.WARNING, logger="lakelog.server.remote"):
        report = manager.run_once()
    assert (report.errors, report.orphans_deleted) == ([], 0)
    stored = RemoteLogManifest.from_json(manager.storage.read_manifest(remote.directory) or b"", "m")
    assert (stored.segments, stored.leader_epoch, stored.version) == (ours.segments, 2, theirs.version + 1)
    assert manager.manifest(7, 0) == stored
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1 and "written over in leader epoch 1 by a replaced leader" in warnings[0]
    last = ours.segments[-1]
    assert remote.fetch_info(manager.storage, last.start_offset).segments[0] == last


def test_after_a_restart_a_manifest_a_replaced_leader_wrote_over_fails_closed(tmp_path: Path, tablet: LogTablet, clock: Clock) -> None:
    """Restarted, this leader no longer holds the list it wrote; its checkpoint's epoch tells that
    the stored one is a replaced leader's: nothing is deleted and the range reads fail naming it."""
    tablet.epochs.assign(2, 0)
    manager = manager_for(tmp_path, tablet, clock)
    assert not manager.run_once().errors
    ours = manager.manifest(7, 0)
    directory = manager.tablet(7, 0).directory
    manager.storage.write_manifest(directory, RemoteLogManifest(ours.version, ours.segments[:2], leader_epoch=1))
    files = remote_names(manager)

    restarted = manager_for(tmp_path, tablet, clock)
    clock.now += 2 * restarted.orphan_grace_ms
    report = restarted.run_once()
    assert [type(error) for error in report.errors] == [RemoteStorageError]
    assert "was written in leader epoch 1, older than the version" in str(report.errors[0])
    assert "leader epoch 2 this server wrote: a replaced leader wrote over it" in str(report.errors[0])
    assert remote_names(restarted) == files
    with pytest.raises(RemoteStorageError, match="lakelog repair remote shop.orders"):
        restarted.tablet(7, 0).fetch_info(restarted.storage, ours.segments[-1].start_offset)


def test_what_a_repair_leaves_out_goes_as_orphans_after_the_grace_period(tmp_path: Path, tablet: LogTablet, clock: Clock) -> None:
    """A lost .log file splits the remote segments in two runs: the repair keeps the one that
    reaches furthest, says the rest goes, and the next passes delete it once old enough."""
    manager = manager_for(tmp_path, tablet, clock)
    assert not manager.run_once().errors
    segments = manager.manifest(7, 0).segments
    directory = Path(manager.tablet(7, 0).directory.path)
    (directory / segments[1].segment_id / f"{segments[1].start_offset:020d}.log").unlink()

    summary = manager.repair(7, 0)
    assert f"{len(segments) - 2} of {len(segments) - 1} segments (what it leaves out goes as orphans" in summary
    assert manager.manifest(7, 0).segments == segments[2:]
    assert manager.run_once().orphans_deleted == 0, "younger than the grace period"
    written = (clock.now - manager.orphan_grace_ms - 1_000) / 1000
    for file in directory.rglob("*"):
        if file.is_file():
            os.utime(file, (written, written))
    clock.now += manager.reconcile_interval_ms
    assert manager.run_once().orphans_deleted == 2
    assert remote_names(manager) == {"manifest.json", *(segment.segment_id for segment in segments[2:])}


def test_a_reconcile_reads_the_manifest_once(tmp_path: Path, tablet: LogTablet, clock: Clock) -> None:
    """The check for a replaced leader's manifest and the fail-closed check share one GET."""

    class Counting(RemoteLogStorage):
        reads = 0

        def read_manifest(self, tablet_dir: RemoteLocation) -> bytes | None:
            self.reads += 1
            return super().read_manifest(tablet_dir)

    tablet.epochs.assign(2, 0)
    manager = manager_for(tmp_path, tablet, clock, Counting)
    assert not manager.run_once().errors
    manager.storage.reads = 0  # type: ignore[attr-defined]
    manager.tablet(7, 0).reconcile_due = float("-inf")
    assert manager.run_once().errors == [] and manager.storage.reads == 1  # type: ignore[attr-defined]
