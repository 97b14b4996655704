"""Remote metadata fails closed: a bucket's manifest.json that is missing, damaged or
older than what the server wrote never makes the server delete remote segments or skip their
records. Reads of the range fail naming the manifest until `lakelog repair remote` rebuilds it from
the segment files; then every acknowledged record reads back. Real servers, a ``file://`` remote
directory and moto S3 (the ``remote`` fixture)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

import lakelog
from lakelog.errors import RemoteStorageError
from lakelog.server.server_process import ServerProcess
from tests.harness.remote_tier import BATCHES, ROWS_PER_BATCH, Remote, local_log, produce, remote, remote_manager  # noqa: F401
from tests.harness.tables import create_table, scan_all

TOTAL = BATCHES * ROWS_PER_BATCH


def client_conf(remote: Remote) -> dict[str, str]:
    return {key: value for key, value in remote.conf.items() if key.startswith("remote.fs.")}


def read_from_zero(address: str, remote: Remote, path: lakelog.TablePath) -> list[int]:
    with lakelog.connect(address, client_conf(remote)) as conn:
        with conn.get_table(path).new_scan().project(["id"]).create_log_scanner() as scanner:
            scanner.subscribe(0, 0)
            return scan_all(scanner, TOTAL).column("id").to_pylist()


def damage(remote: Remote, table: lakelog.Table, how: str, old_manifest: bytes) -> None:
    location = remote.tablet_dir(table).child("manifest.json")
    if how == "deleted":
        remote.fs().delete_file(location.path)
        return
    with remote.fs().open_output_stream(location.path) as out:
        out.write(b'{"version": 3, "segm' if how == "damaged" else old_manifest)


@pytest.mark.parametrize("how", ["deleted", "damaged", "stale"])
def test_lost_manifest_deletes_nothing_fails_reads_by_name_and_repair_brings_every_record_back(
    remote: Remote, server_factory: Callable[..., ServerProcess], tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    data_dir = tmp_path / "data"
    conf = {**remote.conf, "remote.log.orphan-grace": "0ms"}  # would delete every orphan at once
    server = server_factory(data_dir, **conf)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn)
        produce(table, BATCHES // 2)
        assert remote_manager(server).run_once().errors == []
        old_manifest = remote.read(remote.tablet_dir(table).child("manifest.json"))  # for "stale"
        produce(table, BATCHES // 2, first_id=TOTAL // 2)
        assert remote_manager(server).run_once().errors == []
    local_start = local_log(server, table).log_start_offset
    assert local_start > TOTAL // 2, "most records are in remote storage only"
    segment_dirs = remote.names(table) - {"manifest.json"}
    remote_end = remote.manifest(table)[-1]["end_offset"]
    server.stop()
    damage(remote, table, how, old_manifest)

    with caplog.at_level(logging.ERROR, logger="lakelog.server.remote"):
        restarted = server_factory(data_dir, **conf)
        report = remote_manager(restarted).run_once()
    manifest_uri = f"{remote.tablet_dir(table).uri}/manifest.json"
    assert [type(error) for error in report.errors] == [RemoteStorageError]
    assert report.orphans_deleted == 0 and remote.names(table) >= segment_dirs
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and manifest_uri in errors[0] and "shop.orders bucket 0" in errors[0]
    assert restarted.metrics.registry.get_sample_value("lakelog_remote_manifest_errors", {"table": "shop.orders"}) == 1
    with pytest.raises(RemoteStorageError, match="lakelog repair remote shop.orders") as raised:
        read_from_zero(restarted.address, remote, table.path)
    assert manifest_uri in str(raised.value)
    assert remote_manager(restarted).run_once().orphans_deleted == 0 and remote.names(table) >= segment_dirs
    with lakelog.connect(restarted.address) as conn:  # the local tier keeps serving, writes included
        local = conn.get_table(table.path).new_scan().create_log_scanner()
        local.subscribe(0, local_start)
        assert scan_all(local, TOTAL - local_start).num_rows == TOTAL - local_start

    repaired = subprocess.run(
        [sys.executable, "-m", "lakelog", "repair", "remote", "shop.orders", "--bootstrap", restarted.address],
        capture_output=True, text=True, timeout=120,
    )
    assert repaired.returncode == 0, repaired.stderr
    assert f"bucket 0: rebuilt {manifest_uri}" in repaired.stdout and f"offsets [0, {remote_end})" in repaired.stdout

    assert read_from_zero(restarted.address, remote, table.path) == list(range(TOTAL))
    assert restarted.metrics.registry.get_sample_value("lakelog_remote_manifest_errors", {"table": "shop.orders"}) == 0
    report = remote_manager(restarted).run_once()
    assert report.errors == [] and remote.names(table) >= segment_dirs


def test_orphans_are_deleted_once_older_than_the_grace_period_inside_the_range_and_past_it(
    remote: Remote, server_factory: Callable[..., ServerProcess]
) -> None:
    """Segment files the manifest does not name: one past its end (an upload it never recorded) and
    one inside its range (an upload retried under another id, a replaced leader's) are deleted
    once older than the grace period; the segments it names stay and read back."""
    server = server_factory(**remote.conf)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn)
        produce(table, BATCHES // 2)
    manager = remote_manager(server)
    assert manager.run_once().errors == []
    manifest = remote.manifest(table)
    fs, tablet_dir = remote.fs(), remote.tablet_dir(table)
    inside, past = tablet_dir.child("inside-range"), tablet_dir.child("past-range")
    for directory in (inside, past):
        fs.create_dir(directory.path)
    fs.copy_file(remote.segment_file(table, manifest[1], ".log").path, inside.child(f"{manifest[1]['start_offset']:020d}.log").path)
    fs.copy_file(remote.segment_file(table, manifest[1], ".log").path, past.child(f"{manifest[-1]['end_offset']:020d}.log").path)
    tablet = manager.tablet(table.info.table_id, 0)

    tablet.reconcile_due = float("-inf")
    assert manager.run_once().orphans_deleted == 0, "younger than the grace period (1h)"
    now = manager.clock()
    manager.clock = lambda: now + manager.orphan_grace_ms + 1_000  # an hour later, not "0 ms later": mtimes are coarse
    tablet.reconcile_due = float("-inf")
    assert manager.run_once().orphans_deleted == 2
    assert remote.names(table) == {"manifest.json", *(segment["segment_id"] for segment in manifest)}
    with lakelog.connect(server.address, client_conf(remote)) as conn:
        with conn.get_table(table.path).new_scan().project(["id"]).create_log_scanner() as scanner:
            scanner.subscribe(0, 0)
            assert scan_all(scanner, TOTAL // 2).column("id").to_pylist() == list(range(TOTAL // 2))
