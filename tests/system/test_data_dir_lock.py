"""Spec section 12: one server per data directory and per port. Real `python -m lakelog server`
processes: a second one exits with an error naming what is taken, changes nothing, and the first
keeps serving."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import lakelog
from lakelog.server.log.acknowledged_offset import AcknowledgedOffsetCheckpoint
from tests.harness.server_subprocess import ServerSubprocess
from tests.harness.tables import create_table, order_rows, scan_all


def run_second_server(data_dir: Path, port: int | str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "lakelog", "server", "--data-dir", str(data_dir), "--port", str(port)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def files_of(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``directory`` with its size and modification time (ns)."""
    return {
        str(path.relative_to(directory)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def produce_and_count(address: str, start: int, count: int) -> list[int]:
    """Append ``count`` orders to shop.orders (created when ``start`` is 0), then read the whole bucket back: the ids, in order."""
    with lakelog.connect(address) as conn:
        path = lakelog.TablePath("shop", "orders")
        table = conn.get_table(path) if start else create_table(conn)
        with table.new_append().create_writer() as writer:
            writer.append_arrow(order_rows(start, count))
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            return scan_all(scanner, start + count).column("id").to_pylist()


def wait_until_idle(data_dir: Path, acknowledged: int) -> None:
    """Until the first server's once-a-second checkpoint of the acknowledged offset has caught up:
    from then on, with its remote task an hour away, it writes nothing while idle."""
    deadline = time.monotonic() + 30
    while list(AcknowledgedOffsetCheckpoint.read(data_dir / "tablet-server" / "log").values()) != [acknowledged]:
        assert time.monotonic() < deadline, "the first server never checkpointed its acknowledged offset"
        time.sleep(0.1)


def test_second_server_on_one_data_dir_exits_naming_it_and_changes_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = ServerSubprocess(data_dir, "--set", "remote.log.task-interval=1h").start()
    try:
        assert produce_and_count(first.address, 0, 500) == list(range(500))
        wait_until_idle(data_dir, 500)
        before = files_of(data_dir)

        second = run_second_server(data_dir, 0)

        assert second.returncode == 1
        assert "DataDirectoryLockedError" in second.stderr and str(data_dir.resolve()) in second.stderr
        assert f"pid {first.proc.pid}" in second.stderr
        assert files_of(data_dir) == before
        assert produce_and_count(first.address, 500, 500) == list(range(1000))
    finally:
        first.stop()


def test_lock_is_freed_when_the_holder_dies(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = ServerSubprocess(data_dir).start()
    assert produce_and_count(first.address, 0, 300) == list(range(300))
    first.kill()
    restarted = ServerSubprocess(data_dir).start()
    try:
        assert produce_and_count(restarted.address, 300, 100) == list(range(400))
    finally:
        restarted.stop()


def test_second_server_on_a_port_in_use_exits_naming_the_port(tmp_path: Path) -> None:
    first = ServerSubprocess(tmp_path / "first").start()
    try:
        assert produce_and_count(first.address, 0, 200) == list(range(200))
        port = first.address.rsplit(":", 1)[1]

        second = run_second_server(tmp_path / "second", port)

        assert second.returncode == 1
        assert f"cannot listen on 127.0.0.1:{port}" in second.stderr and "in use" in second.stderr
        assert not (tmp_path / "second" / "tablet-server").exists(), "nothing opened before the port was bound"
        # Every call still reaches the first server (with SO_REUSEPORT the kernel would split them).
        assert produce_and_count(first.address, 200, 200) == list(range(400))
    finally:
        first.stop()
