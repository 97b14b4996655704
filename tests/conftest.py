"""Shared fixtures: real servers on loopback, real connections, small table factories."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.server.server_process import ServerProcess

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# moto's credentials for every process the tests start, Spark's Python workers included: a worker
# daemon forked before an S3 test ran would otherwise have none.
for _key, _value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"), ("AWS_REGION", "us-east-1")):
    os.environ.setdefault(_key, _value)

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
    """Poll until at least ``expected`` records arrived (or fail after ``timeout_s``); everything
    polled, as one table (a partitioned table's with ``__partition_id``). With ``expected == 0``: an
    empty table of the scanner's columns."""
    import time

    from lakelog.record.meta_columns import with_meta_fields

    tables: list[pa.Table] = []
    got = 0
    deadline = time.monotonic() + timeout_s
    while got < expected:
        assert time.monotonic() < deadline, f"only {got} of {expected} records arrived"
        table = scanner.poll_arrow(timeout_ms=500)
        if table.num_rows:
            tables.append(table)
            got += table.num_rows
    return pa.concat_tables(tables) if tables else with_meta_fields(scanner.schema).empty_table()


def member_metadata(server: ServerProcess) -> tuple[tuple[str, str], ...]:
    """gRPC metadata that makes a raw call a cluster member's: the embedded server's own secret."""
    return (("lakelog-cluster-secret", (server.data_dir / "cluster-secret").read_text()),)


def wait_until(condition: Callable[[], Any], what: str, timeout_s: float = 60.0) -> Any:
    """Poll ``condition`` until it gives something true, and return that; fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)
    return result


class ServerSubprocess:
    """`python -m lakelog server` in its own process, for kill -9 tests."""

    def __init__(self, data_dir: Path, *extra: str, open_files: tuple[int, int] | None = None) -> None:
        """``open_files``: the process's soft and hard limits on open files (default: this one's)."""
        self.data_dir = data_dir
        self.extra = extra
        self.open_files = open_files
        self.proc: subprocess.Popen[str] | None = None
        self.address = ""

    def _limit_open_files(self) -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, self.open_files)

    def start(self) -> "ServerSubprocess":
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lakelog", "server", "--data-dir", str(self.data_dir), "--port", "0", *self.extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            preexec_fn=self._limit_open_files if self.open_files else None,
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


from tests.harness.s3 import free_port, moto_s3, s3_outage  # noqa: E402,F401 - fixtures shared by every test module


# ---------------------------------------------------------------- the lake tier

LAKE_TABLE = {"table.datalake.enabled": "true"}
# Small segments uploaded at once, one kept locally: most of a bucket is read from remote storage.
REMOTE_TIER = {"log.segment.max-bytes": "256kb", "remote.log.task-interval": "200ms"}
# Metrics (and the status page) on, small segments; the remote task runs only when a test says so
# (run_once, expire_remote).
TIERED_SERVER = {"metrics.port": 0, "log.segment.max-bytes": "64kb", "remote.log.task-interval": "1h"}
# One local segment kept once uploaded; remote segments expire an hour after the lake holds them.
TIERED_TABLE = {**LAKE_TABLE, "table.log.ttl": "1h", "table.log.tiered.local-segments": "1"}


@pytest.fixture
def tiered_server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory(**TIERED_SERVER)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] SparkSession for every test that tiers in-process (one takes seconds to start)."""
    from lakelog.spark_session import spark_session

    session = spark_session("local[2]", "lakelog-tests")
    yield session
    session.stop()


def start_spark_connect(log: Path) -> tuple[subprocess.Popen[str], str]:
    """`lakelog spark-connect` in its own process (local[2]), its log in ``log``; the process and its
    ``sc://`` address once it says it is ready."""
    port = free_port()
    # The repository on its Python path, as site-packages is after a regular install: Spark finds
    # module pyspark_lakelog with pkgutil.iter_modules, which cannot see an editable install's modules.
    python_path = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH")]))
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "lakelog", "spark-connect", "--port", str(port), "--master", "local[2]"],
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
            env={**os.environ, "PYTHONPATH": python_path},
        )
    assert proc.stdout is not None
    ready = proc.stdout.readline()
    assert f"ready on sc://127.0.0.1:{port}" in ready, f"spark-connect said {ready!r}; its log: {log.read_text()[-3000:]}"
    return proc, f"sc://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server shared by every test that reaches Spark through it; its ``sc://``
    address. At the end it must stop cleanly on SIGTERM and free its port. Connect sessions live in
    subprocesses only: one in this process would switch PySpark to Connect mode under the tests that
    use the classic ``spark`` fixture."""
    log = tmp_path_factory.mktemp("spark-connect") / "server.log"
    proc, address = start_spark_connect(log)
    yield address
    port = int(address.rsplit(":", 1)[1])
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0, log.read_text()[-3000:]
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, "the Spark Connect server still listens after SIGTERM"


def produce_orders(table: lakelog.Table, start: int, count: int, batch: int = 2000) -> None:
    writer = table.new_append().create_writer()
    for first in range(start, start + count, batch):
        writer.append_arrow(order_rows(first, min(batch, start + count - first)))
    writer.flush()


def lake_table(server: ServerProcess, path: lakelog.TablePath) -> Any:
    """The PyIceberg table of ``path``, opened with the server's full lake configuration."""
    from lakelog.lake.lake_catalog import LakeCatalog
    from lakelog.lake_config import LakeConfig

    return LakeCatalog(LakeConfig.from_configuration(server.conf, server.data_dir)).load_table(path)


def log_rows(address: str, path: lakelog.TablePath) -> pa.Table:
    """Every record of the log up to the high watermarks, read without the lake, by bucket and offset."""
    with lakelog.connect(address, {"client.lake.enabled": "false"}) as conn:
        total = sum(conn.admin.list_offsets(path).values())
        with conn.get_table(path).new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            rows = scan_all(scanner, total)
    return rows.sort_by([("__bucket", "ascending"), ("__offset", "ascending")])


def assert_lake_holds_log(server: ServerProcess, path: lakelog.TablePath) -> pa.Table:
    """The lake holds every offset of every bucket exactly once, with the log's values and
    timestamps, and the coordinator's lake snapshot is the lake's latest. Returns the lake rows."""
    from lakelog.lake.snapshot_summary import latest_lake_snapshot

    table = lake_table(server, path)
    lake = table.scan().to_arrow().sort_by([("__bucket", "ascending"), ("__offset", "ascending")])
    log = log_rows(server.address, path)
    assert lake.num_rows == log.num_rows
    assert lake.column("__bucket").equals(log.column("__bucket"))
    assert lake.column("__offset").equals(log.column("__offset"))
    millis = pc.divide(lake.column("__timestamp").cast(pa.int64()), 1000)
    assert millis.equals(log.column("__timestamp"))
    names = ORDERS_SCHEMA.names
    assert lake.select(names).cast(ORDERS_SCHEMA).equals(log.select(names))
    with lakelog.connect(server.address) as conn:
        assert conn.admin.get_lake_snapshot(path) == latest_lake_snapshot(table)
    return lake


def run_tier(address: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m lakelog tier --once` in its own process (its own SparkSession)."""
    command = [sys.executable, "-m", "lakelog", "tier", "--bootstrap", address, "--once", "--spark-master", "local[2]", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


DAY_MS = 86_400_000


def expire_remote(manager: Any, days: float = 2) -> Any:
    """One remote pass of ``manager`` (a RemoteLogManager) as if ``days`` had passed, then its real
    clock back: what is past ``table.log.ttl`` (and, for a lake table, in the lake) expires. The pass's report."""
    real_clock = manager.clock
    manager.clock = lambda: real_clock() + int(days * DAY_MS)
    try:
        return manager.run_once()
    finally:
        manager.clock = real_clock


def wait_for_remote(conn: lakelog.Connection, path: lakelog.TablePath) -> None:
    """Until every bucket's oldest records are in remote storage only."""
    deadline = time.monotonic() + 30
    while True:
        buckets = conn.admin.describe_buckets(path)
        if all(b.remote_log_end_offset > 0 and b.local_log_start_offset > 0 for b in buckets.values()):
            return
        assert time.monotonic() < deadline, f"segments never moved to remote storage: {buckets}"
        time.sleep(0.2)
