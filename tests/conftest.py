"""Shared fixtures: real servers on loopback, real connections, Spark; each test's tier (unit,
integration, system) is its folder's, as a marker."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import lakelog
from lakelog.server.server_process import ServerProcess
from tests.harness.lake_tier import TIERED_SERVER
from tests.harness.s3 import moto_s3, s3_outage  # noqa: F401 - fixtures shared by every test module
from tests.harness.spark_connect import start_spark_connect

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# moto's credentials for every process the tests start, Spark's Python workers included: a worker
# daemon forked before an S3 test ran would otherwise have none.
for _key, _value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"), ("AWS_REGION", "us-east-1")):
    os.environ.setdefault(_key, _value)

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "integration", "system")


def pytest_configure(config: pytest.Config) -> None:
    """``make test`` collects the three tier folders only: a test module anywhere else would never
    run, so it stops the run instead, naming the module."""
    stray = sorted(str(path.relative_to(TESTS.parent)) for path in TESTS.rglob("test_*.py") if path.relative_to(TESTS).parts[0] not in TIERS)
    if stray:
        raise pytest.UsageError(f"test modules outside tests/unit, tests/integration and tests/system would not run: {', '.join(stray)}; move each into its tier")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``-m unit`` (or integration, system) selects a tier wherever the tests are named from."""
    for item in items:
        folder = item.path.resolve().relative_to(TESTS).parts[0]
        if folder in TIERS:
            item.add_marker(folder)


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


@pytest.fixture
def tiered_server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory(**TIERED_SERVER)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] SparkSession for every test that tiers in-process (one takes seconds to start)."""
    from lakelog.spark_runtime.spark_session import spark_session

    session = spark_session("local[2]", "lakelog-tests")
    yield session
    session.stop()


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
