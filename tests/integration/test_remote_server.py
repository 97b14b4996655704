"""The remote log tier, server side: real tablet servers on loopback, real segment files, a real
``file://`` directory and a real (moto) S3 behind a proxy that can be cut.

``remote.log.task-interval`` is an hour, so nothing runs in the background: each test drives the
remote log task with ``server.tablet.remote.run_once()``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable

import grpc
import pytest

import lakelog
from lakelog.errors import OffsetOutOfRangeError, RemoteStorageError
from lakelog.record.batch import read_header
from lakelog.remote_fs import RemoteLocation
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceStub
from lakelog.server.log.log_tablet import LogTablet
from lakelog.server.remote.manifest import RemoteLogManifest
from lakelog.server.remote.remote_storage import RemoteLogStorage
from lakelog.server.server_process import ServerProcess
from tests.harness.remote_tier import BASE_CONF, BATCHES, ROWS_PER_BATCH, Remote, all_batches, fetch, local_log, produce, remote, remote_manager  # noqa: F401 - remote is a fixture
from tests.harness.s3 import MotoS3, TcpProxy
from tests.harness.tables import create_table, scan_all


@pytest.fixture
def s3_remote(moto_s3: MotoS3) -> Remote:
    return Remote({**BASE_CONF, "remote.data.dir": f"s3://{moto_s3.create_bucket()}/lakelog", **moto_s3.settings()})


def rolled_ranges(tablet: LogTablet) -> list[tuple[int, int]]:
    return [(segment.base_offset, segment.next_offset) for segment in tablet.segments[:-1]]


def describe_raw(server: ServerProcess, table: lakelog.Table) -> pb.PbLogBucketInfo:
    with grpc.insecure_channel(server.address) as channel:
        response = TabletServiceStub(channel).DescribeLogBuckets(
            pb.DescribeLogBucketsRequest(table_id=table.info.table_id, bucket_id=[0]), timeout=30
        )
    return response.buckets[0]


def assert_uploaded_once(remote: Remote, table: lakelog.Table, ranges: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """The manifest lists exactly ``ranges``, each once, and the tablet dir holds nothing else."""
    segments = remote.manifest(table)
    assert [(s["start_offset"], s["end_offset"]) for s in segments] == ranges
    ids = [s["segment_id"] for s in segments]
    assert len(set(ids)) == len(ids)
    assert remote.names(table) == {"manifest.json", *ids}
    return segments


def test_rolled_segments_upload_and_fetch_below_local_start_points_to_remote(
    remote: Remote, server_factory: Callable[..., ServerProcess], caplog: pytest.LogCaptureFixture
) -> None:
    server = server_factory(**remote.conf)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn)
        produce(table)
        tablet = local_log(server, table)
        rolled = rolled_ranges(tablet)
        assert len(rolled) >= 5
        with caplog.at_level(logging.INFO, logger="lakelog.server.remote"):
            report = remote_manager(server).run_once()
        assert (report.errors, report.uploaded) == ([], len(rolled))
        assert f"uploaded shop.orders bucket 0 segment [0, {rolled[0][1]}) " in caplog.text
        segments = assert_uploaded_once(remote, table, rolled)
        for segment in segments:
            size = remote.fs().get_file_info(remote.segment_file(table, segment, ".log").path).size
            assert size == segment["size_in_bytes"]
        assert remote_manager(server).run_once().uploaded == 0
        assert remote.manifest(table) == segments

        local_start = rolled[-1][0]
        assert len(tablet.segments) == 2 and tablet.log_start_offset == local_start
        info = conn.admin.describe_buckets(table.path)[0]
        assert (info.local_log_start_offset, info.remote_log_start_offset, info.remote_log_end_offset) == (
            local_start, 0, rolled[-1][1],
        )
        raw = describe_raw(server, table)
        assert (raw.local_segment_count, raw.remote_segment_count) == (2, len(rolled))

        tablet_dir = remote.tablet_dir(table).uri
        for offset in [0, 1, rolled[0][1], rolled[2][0] + 150, local_start - 1]:
            answer = fetch(server, table, offset)
            assert answer.error_code == 0 and answer.records == b""
            assert (answer.high_watermark, answer.log_start_offset) == (BATCHES * ROWS_PER_BATCH, 0)
            info_pb = answer.remote_log_fetch_info
            assert info_pb.remote_log_tablet_dir == tablet_dir and info_pb.partition_name == ""
            first = next(i for i, s in enumerate(segments) if s["start_offset"] <= offset < s["end_offset"])
            assert [
                (s.remote_log_segment_id, s.remote_log_start_offset, s.remote_log_end_offset, s.segment_size_in_bytes, s.max_timestamp)
                for s in info_pb.remote_log_segments
            ] == [
                (s["segment_id"], s["start_offset"], s["end_offset"], s["size_in_bytes"], s["max_timestamp"])
                for s in segments[first : first + 16]
            ]
            log_bytes = remote.read(remote.segment_file(table, segments[first], ".log"))
            header = read_header(log_bytes, info_pb.first_start_pos)
            assert header.base_offset <= offset <= header.last_offset
            assert "testing" not in str(answer)  # the URI only: no credentials ever go out
        local = fetch(server, table, local_start)
        assert local.records and not local.HasField("remote_log_fetch_info")

        batches = all_batches(remote, table, tablet)
        assert conn.admin.list_offsets(table.path, spec=lakelog.OffsetSpec.earliest()) == {0: 0}

        def first_at_or_after(ms: int) -> int:
            return next((offset for offset, ts in batches if ts >= ms), BATCHES * ROWS_PER_BATCH)

        by_start = dict(batches)
        probes = [batches[0][1] - 1, batches[0][1]]
        for start, end in rolled[:-1]:
            in_segment = [ts for offset, ts in batches if start <= offset < end]
            probes += [by_start[start], in_segment[len(in_segment) // 2], in_segment[-1], in_segment[-1] + 1]
        probes += [by_start[local_start], batches[-1][1] + 1]
        for ms in probes:
            expected = first_at_or_after(ms)
            assert conn.admin.list_offsets(table.path, spec=lakelog.OffsetSpec.timestamp(ms)) == {0: expected}, ms
        assert sum(first_at_or_after(ms) < local_start for ms in probes) >= 3 * (len(rolled) - 1)


def test_restart_after_upload_before_manifest_write(remote: Remote, server_factory: Callable[..., ServerProcess], tmp_path: Path) -> None:
    """A crash between a segment upload and its manifest write leaves orphan files: the restarted
    server deletes them and uploads the segment again, so the manifest lists each segment once."""

    class CrashBeforeManifest(RemoteLogStorage):
        def write_manifest(self, tablet_dir: RemoteLocation, manifest: RemoteLogManifest) -> None:
            raise RemoteStorageError("simulated crash before the manifest write")

    remote = Remote({**remote.conf, "remote.log.orphan-grace": "0ms"})  # the orphan may go at once
    data_dir = tmp_path / "data"
    server = server_factory(data_dir, **remote.conf)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn)
        produce(table, 60)
    rolled = rolled_ranges(local_log(server, table))
    manager = remote_manager(server)
    manager.storage = CrashBeforeManifest(manager.storage.root, manager.storage.settings)
    report = manager.run_once()
    assert report.uploaded == 0 and [type(e) for e in report.errors] == [RemoteStorageError]
    orphans = remote.names(table)
    assert len(orphans) == 1 and "manifest.json" not in orphans  # the first segment, uploaded, unrecorded
    assert rolled_ranges(local_log(server, table)) == rolled  # nothing local deleted
    server.stop()

    restarted = server_factory(data_dir, **remote.conf)
    with lakelog.connect(restarted.address) as conn:
        table = conn.get_table(table.path)
        assert conn.admin.describe_buckets(table.path)[0].remote_log_start_offset == -1
        report = remote_manager(restarted).run_once()
        assert (report.errors, report.orphans_deleted, report.uploaded) == ([], 1, len(rolled))
        segments = assert_uploaded_once(remote, table, rolled)
        assert segments[0]["segment_id"] not in orphans
        assert remote_manager(restarted).run_once().uploaded == 0
        assert remote.manifest(table) == segments
        assert fetch(restarted, table, 0).remote_log_fetch_info.remote_log_segments[0].remote_log_segment_id == segments[0]["segment_id"]


def test_s3_outage_mid_pass_leaves_local_log_working(
    s3_remote: Remote, s3_outage: TcpProxy, server_factory: Callable[..., ServerProcess], caplog: pytest.LogCaptureFixture
) -> None:
    """S3 goes away after the first segment of a pass: the pass fails cleanly, produce and fetch go
    on locally, nothing local is deleted, and once S3 is back the next pass uploads the rest once."""

    class OutageAfterFirstSegment(RemoteLogStorage):
        def write_manifest(self, tablet_dir: RemoteLocation, manifest: RemoteLogManifest) -> None:
            super().write_manifest(tablet_dir, manifest)
            s3_outage.cut()

    server = server_factory(**s3_remote.conf)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn)
        produce(table, 80)
        tablet = local_log(server, table)
        rolled = rolled_ranges(tablet)
        manager = remote_manager(server)
        plain_storage = manager.storage
        manager.storage = OutageAfterFirstSegment(plain_storage.root, plain_storage.settings)
        with caplog.at_level(logging.WARNING, logger="lakelog.server.remote"):
            report = manager.run_once()
        assert report.uploaded == 1 and len(report.errors) == 1 and isinstance(report.errors[0], RemoteStorageError)
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "remote log task" in r.getMessage()]
        assert len(warnings) == 1 and "shop.orders bucket 0" in warnings[0].getMessage()
        manager.storage = plain_storage

        produce(table, 40, first_id=80 * ROWS_PER_BATCH)  # local produce while S3 is down
        assert rolled_ranges(tablet)[: len(rolled)] == rolled and tablet.log_start_offset == 0
        scanner = table.new_scan().create_log_scanner()
        scanner.subscribe(0, 0)
        got = 0
        while got < 120 * ROWS_PER_BATCH:
            got += scanner.poll_arrow(timeout_ms=2000).num_rows
        assert manager.run_once().errors  # still down: fails again, still nothing deleted
        assert tablet.log_start_offset == 0

        s3_outage.restore()
        everything = rolled_ranges(tablet)
        report = manager.run_once()
        assert report.errors == [] and report.uploaded == len(everything) - 1
        assert_uploaded_once(s3_remote, table, everything)
        assert len(tablet.segments) == 2


def test_a_log_still_whole_locally_is_read_from_its_beginning_while_s3_is_down(
    s3_remote: Remote, s3_outage: TcpProxy, server_factory: Callable[..., ServerProcess]
) -> None:
    """The earliest offset of a local log that starts at 0 is 0 in every tier: answering it never
    waits on remote storage, so a first ``subscribe_from_beginning`` reads every record with S3 cut."""
    server = server_factory(**s3_remote.conf)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, buckets=2)
        produce(table, 4)
        s3_outage.cut()
        assert conn.admin.list_offsets(table.path, spec=lakelog.OffsetSpec.earliest()) == {0: 0, 1: 0}
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            assert sorted(scan_all(scanner, 4 * ROWS_PER_BATCH, timeout_s=20).column("id").to_pylist()) == list(range(4 * ROWS_PER_BATCH))


def test_ttl_expires_remote_segments(remote: Remote, server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory(**remote.conf)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, properties={"table.log.ttl": "1h"})
        produce(table)
        manager = remote_manager(server)
        assert manager.run_once().expired == 0
        segments = remote.manifest(table)
        expired, kept = segments[:3], segments[3:]
        manager.clock = lambda: expired[-1]["max_timestamp"] + 3_600_000 + 1  # the 4th segment is newer

        report = manager.run_once()
        assert (report.errors, report.expired) == ([], 3)
        assert remote.manifest(table) == kept
        assert remote.names(table) == {"manifest.json", *(s["segment_id"] for s in kept)}
        new_earliest = kept[0]["start_offset"]
        info = conn.admin.describe_buckets(table.path)[0]
        assert (info.remote_log_start_offset, info.remote_log_end_offset) == (new_earliest, segments[-1]["end_offset"])
        for offset in (0, new_earliest - 1):
            answer = fetch(server, table, offset)
            assert answer.error_code == OffsetOutOfRangeError.code and answer.log_start_offset == new_earliest
            assert f"offset {offset} of bucket 0" in answer.error_message and str(new_earliest) in answer.error_message
        assert fetch(server, table, new_earliest).remote_log_fetch_info.remote_log_segments[0].remote_log_segment_id == kept[0]["segment_id"]
        assert conn.admin.list_offsets(table.path, spec=lakelog.OffsetSpec.earliest()) == {0: new_earliest}


def test_ttl_of_lake_enabled_table_waits_for_the_lake(remote: Remote, server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory(**remote.conf)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, properties={"table.datalake.enabled": "true", "table.log.ttl": "1s"})
        produce(table, 80)
        manager = remote_manager(server)
        lake_end: dict[tuple[int, int], int | None] = {}
        manager.lake_end_offset = lambda table_id, bucket: lake_end.get((table_id, bucket))
        manager.clock = lambda: time.time_ns() // 1_000_000 + 86_400_000  # every segment is past the TTL
        assert (manager.run_once().expired, manager.run_once().expired) == (0, 0)  # no lake end: nothing goes
        segments = remote.manifest(table)
        key = (table.info.table_id, 0)
        lake_end[key] = -1
        assert manager.run_once().expired == 0
        lake_end[key] = segments[2]["start_offset"] + 1  # the lake covers segments 0 and 1, part of 2
        assert manager.run_once().expired == 2
        assert remote.manifest(table) == segments[2:]
        assert conn.admin.list_offsets(table.path, spec=lakelog.OffsetSpec.earliest()) == {0: segments[2]["start_offset"]}


def test_the_server_timer_uploads_and_trims_on_its_own(tmp_path: Path, server_factory: Callable[..., ServerProcess]) -> None:
    remote = Remote({**BASE_CONF, "remote.log.task-interval": "200ms", "remote.data.dir": (tmp_path / "remote").as_uri()})
    server = server_factory(**remote.conf)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn)
        produce(table, 60)
        tablet = local_log(server, table)
        deadline = time.monotonic() + 30
        while len(tablet.segments) > 2:
            assert time.monotonic() < deadline, "the remote log task never trimmed the local log"
            time.sleep(0.05)
        info = conn.admin.describe_buckets(table.path)[0]
        assert (info.remote_log_start_offset, info.remote_log_end_offset) == (0, tablet.segments[-1].base_offset)
