"""The unit tier runs without the network and without processes: a test that opens a network socket,
starts a gRPC server or channel, or starts a process fails naming what it tried."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator

import grpc
import grpc.aio
import pytest

NETWORK_FAMILIES = (socket.AF_INET, socket.AF_INET6)


class UnitTierViolation(AssertionError):
    """A unit test reached for the network or a process."""


def _refuse(what: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise UnitTierViolation(f"a unit test may not {what}; it belongs in tests/integration or tests/system")

    return refuse


class _LocalSocket(socket.socket):
    """socket.socket that refuses network families: asyncio's own AF_UNIX socketpair still works."""

    def __init__(self, family: int = -1, type: int = -1, proto: int = -1, fileno: int | None = None) -> None:
        if fileno is None and (family == -1 or family in NETWORK_FAMILIES):
            raise UnitTierViolation("a unit test may not open a network socket; it belongs in tests/integration or tests/system")
        super().__init__(family, type, proto, fileno)


@pytest.fixture(autouse=True)
def no_network_no_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every unit test: what would make it depend on a server or the machine fails it at once,
    so a test that needs one is moved to its tier instead of slowing this one down."""
    monkeypatch.setattr(socket, "socket", _LocalSocket)
    monkeypatch.setattr(socket, "create_connection", _refuse("connect a socket"))
    monkeypatch.setattr(socket, "create_server", _refuse("listen on a socket"))
    for module, names in ((grpc, ("server", "insecure_channel", "secure_channel")), (grpc.aio, ("server", "insecure_channel", "secure_channel"))):
        for name in names:
            monkeypatch.setattr(module, name, _refuse(f"use grpc.{name}"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("start a process"))
    yield


@pytest.fixture
def tmpfs_path(tmp_path: Path) -> Iterator[Path]:
    """A temporary directory in memory where the machine has /dev/shm (else ``tmp_path``): the
    fsyncs of the coordinator's SQLite store and of bucket logs cost nothing there, so the tier
    stays quick on a busy disk."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="lakelog-unit-", dir=shm))
    yield path
    shutil.rmtree(path, ignore_errors=True)
