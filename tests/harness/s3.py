"""S3 for tests: moto's real server on loopback, behind a TCP proxy a test can cut and restore.

moto keeps objects in memory, so an outage is the proxy refusing connections, not a moto restart.
"""

from __future__ import annotations

import random
import socket
import threading
import uuid
from contextlib import closing
from typing import Iterator

import pytest
from moto.server import ThreadedMotoServer

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"


def _ephemeral_range() -> range:
    try:
        low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


_EPHEMERAL = _ephemeral_range()
_handed_out: set[int] = set()
_ports_lock = threading.Lock()


def free_port() -> int:
    """A port no one listens on, outside the kernel's ephemeral range: a port the kernel picks for
    bind(0) can be taken by any outgoing connection before a server process started later binds it."""
    with _ports_lock:
        for _ in range(1000):
            port = random.randrange(10000, 32000)
            if port in _handed_out or port in _EPHEMERAL:
                continue
            with closing(socket.socket()) as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    raise RuntimeError("no free port between 10000 and 32000")


class TcpProxy:
    """Forwards 127.0.0.1:port to a target; ``cut()`` drops every connection and refuses new ones;
    while ``swallow_answers`` is set, what the target sends back is dropped (requests still pass)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._up = threading.Event()
        self._up.set()
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        self.swallow_answers = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._up.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._connections += [client, upstream]
            for src, dst, swallow in ((client, upstream, None), (upstream, client, self.swallow_answers)):
                threading.Thread(target=self._pipe, args=(src, dst, swallow), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, swallow: threading.Event | None) -> None:
        try:
            while data := src.recv(65536):
                if swallow is None or not swallow.is_set():
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        self._up.clear()
        with self._lock:
            connections, self._connections = self._connections, []
        for sock in connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            except OSError:
                pass

    def restore(self) -> None:
        self._up.set()

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._listener.close()


class MotoS3:
    """A moto S3 server and a proxy in front of it; ``endpoint`` goes through the proxy."""

    def __init__(self) -> None:
        self.port = free_port()
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        self.proxy = TcpProxy(self.port)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.proxy.port}"

    def create_bucket(self, name: str | None = None) -> str:
        import boto3

        name = name or f"lakelog-{uuid.uuid4().hex[:12]}"
        boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{self.port}",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        ).create_bucket(Bucket=name)
        return name

    def settings(self) -> dict[str, str]:
        """Config keys that point lakelog (server or client) at this S3."""
        return {"remote.fs.s3.endpoint": self.endpoint, "remote.fs.s3.region": REGION}

    def stop(self) -> None:
        self.proxy.close()
        self.server.stop()


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3]:
    import os

    os.environ.setdefault("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    os.environ.setdefault("AWS_REGION", REGION)
    s3 = MotoS3()
    yield s3
    s3.stop()


@pytest.fixture
def s3_outage(moto_s3: MotoS3) -> Iterator[TcpProxy]:
    """The proxy, restored after the test whatever it did."""
    yield moto_s3.proxy
    moto_s3.proxy.restore()
