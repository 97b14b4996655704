"""A full data disk: produce gets a clear StorageError, reads keep working, nothing acknowledged is
lost, and produce resumes when space returns. The disk is a real, tiny tmpfs mount (the tests run as
root on the project's machines, as CI does)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterator

import pytest

import lakelog
from lakelog.errors import StorageError
from lakelog.server.server_process import ServerProcess
from tests.harness.tables import create_table, order_rows, scan_all


def run(*command: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.stderr.strip()}): this test mounts a tmpfs and needs root")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    run("mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount_point))
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_disk_full_then_space_returns(small_disk: Path) -> None:
    server = ServerProcess(
        {"data.dir": str(small_disk / "data"), "server.port": 0, "log.segment.max-bytes": "256kb"}
    ).start()
    try:
        with lakelog.connect(server.address) as conn:
            table = create_table(conn, buckets=2)
            writer = table.new_append().create_writer()
            acked = 0

            def produce_until_refused() -> lakelog.LakelogError:
                nonlocal acked
                with pytest.raises(lakelog.LakelogError) as info:
                    for _ in range(10_000):
                        writer.append_arrow(order_rows(acked, 500))
                        writer.flush()
                        acked += 500
                return info.value

            error = produce_until_refused()
            assert isinstance(error, StorageError), error
            assert "No space left on device" in str(error)
            assert acked > 0

            reader = table.new_scan().create_log_scanner()
            reader.subscribe_from_beginning()
            assert sorted(scan_all(reader, acked).column("id").to_pylist()) == list(range(acked)), (
                "reads keep working and every acknowledged record is there"
            )
            # Still full: refused again (space a refused write gave back may take a batch first).
            assert isinstance(produce_until_refused(), StorageError)

            run("mount", "-o", "remount,size=64m", str(small_disk))
            writer.append_arrow(order_rows(acked, 500))
            writer.flush()
            total = sum(conn.admin.list_offsets(table.path).values())
            assert total == acked + 500
            again = table.new_scan().create_log_scanner()
            again.subscribe_from_beginning()
            ids = scan_all(again, total).column("id").to_pylist()
            assert sorted(ids) == list(range(acked + 500)) and len(ids) == len(set(ids))
    finally:
        server.stop(0)
