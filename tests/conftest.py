"""Shared fixtures: real servers on loopback, real connections, small table factories."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa
import pytest

import lakelog
from lakelog.server.server_process import ServerProcess

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

ORDERS_SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start embedded servers (coordinator + tablet server); all are stopped at the end."""
    started: list[ServerProcess] = []

    def start(data_dir: Path | None = None, **config: Any) -> ServerProcess:
        values = {"data.dir": str(data_dir or tmp_path / "data"), "server.port": 0, **config}
        process = ServerProcess(values).start()
        started.append(process)
        return process

    yield start
    for process in reversed(started):
        process.stop(0)


@pytest.fixture
def server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory()


@pytest.fixture
def conn(server: ServerProcess) -> Iterator[lakelog.Connection]:
    with lakelog.connect(server.address) as connection:
        yield connection


def create_table(
    conn: lakelog.Connection,
    name: str = "orders",
    schema: pa.Schema = ORDERS_SCHEMA,
    buckets: int = 1,
    properties: dict[str, str] | None = None,
) -> lakelog.Table:
    path = lakelog.TablePath("shop", name)
    conn.admin.create_database("shop", ignore_if_exists=True)
    conn.admin.create_table(path, lakelog.TableDescriptor(schema, buckets, properties or {}))
    return conn.get_table(path)


def order_rows(start: int, count: int) -> pa.RecordBatch:
    ids = list(range(start, start + count))
    return pa.record_batch(
        [pa.array(ids, pa.int64()), pa.array([f"n{i}" for i in ids]), pa.array([i * 0.5 for i in ids])],
        schema=ORDERS_SCHEMA,
    )


def scan_all(scanner: lakelog.LogScanner, expected: int, timeout_s: float = 60.0) -> pa.Table:
    """Poll until ``expected`` records arrived (or fail after ``timeout_s`` without progress)."""
    import time

    tables = []
    got = 0
    deadline = time.monotonic() + timeout_s
    while got < expected:
        assert time.monotonic() < deadline, f"only {got} of {expected} records arrived"
        table = scanner.poll_arrow(timeout_ms=500)
        if table.num_rows:
            tables.append(table)
            got += table.num_rows
    return pa.concat_tables(tables) if tables else None


class ServerSubprocess:
    """`python -m lakelog server` in its own process, for kill -9 tests."""

    def __init__(self, data_dir: Path, *extra: str) -> None:
        self.data_dir = data_dir
        self.extra = extra
        self.proc: subprocess.Popen[str] | None = None
        self.address = ""

    def start(self) -> "ServerSubprocess":
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lakelog", "server", "--data-dir", str(self.data_dir), "--port", "0", *self.extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if "listening on" in line:
                self.address = line.rsplit(" ", 1)[1].strip()
                return self
        raise AssertionError(f"server exited with {self.proc.wait()} before listening")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


from tests.s3 import moto_s3, s3_outage  # noqa: E402,F401 - fixtures shared by every test module
