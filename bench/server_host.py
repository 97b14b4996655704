"""Servers in processes of their own, as deployed: lakelog's server and the bare grpcio baseline each
run in a child process, so the client being measured (in the benchmark's process) never shares a
GIL with the server it reads from or writes to.

A benchmark still sets its data up through the server's own objects (roll a log, run a remote
pass, read what a tablet stores): it sends a module-level function of this module to the child,
which runs it on its ServerProcess and sends the result back. Nothing is sent while a run is timed.
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from lakelog.config import Configuration
from lakelog.metadata import TablePath
from lakelog.record import batch as rb
from lakelog.server.allocator import keep_buffers_on_heap
from lakelog.server.log.log_tablet import LogTablet
from lakelog.server.server_process import ROLES, ServerProcess

from bench.grpc_baseline import BaselineServer

# spawn, not fork: a forked child would inherit the parent's gRPC threads mid-flight.
_CONTEXT = multiprocessing.get_context("spawn")
_STOP = "stop"


class _Child:
    """A child process that starts a server and then runs the functions the parent sends it."""

    def __init__(self, serve: Callable[..., None], *args: Any) -> None:
        self._conn, child_end = _CONTEXT.Pipe()
        self._proc = _CONTEXT.Process(target=serve, args=(child_end, *args), daemon=True)
        self._proc.start()
        child_end.close()
        self.address: str = self._answer()

    def _answer(self) -> Any:
        ok, value = self._conn.recv()
        if not ok:
            raise RuntimeError(f"server process: {value}")
        return value

    @property
    def pid(self) -> int:
        """The child's process id (its memory is read from /proc)."""
        assert self._proc.pid is not None
        return self._proc.pid

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(server, *args)`` run in the child; its result, or its error as a RuntimeError."""
        self._conn.send((function, args))
        return self._answer()

    def stop(self) -> None:
        if self._proc.is_alive():
            self._conn.send(_STOP)
            self._proc.join(30)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()
        self._conn.close()


def _serve(conn: Connection, server: Any, address: str) -> None:
    """Tell the parent the address, then run what it sends until it says stop."""
    conn.send((True, address))
    while (request := conn.recv()) != _STOP:
        function, args = request
        try:
            conn.send((True, function(server, *args)))
        except Exception as exc:  # noqa: BLE001 - the parent raises it with the benchmark's context
            conn.send((False, f"{type(exc).__name__}: {exc}"))


def _serve_lakelog(conn: Connection, config: Mapping[str, Any], roles: tuple[str, ...]) -> None:
    logging.basicConfig(level=logging.ERROR)
    try:
        server = ServerProcess(dict(config), roles).start()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send((False, f"{type(exc).__name__}: {exc}"))
        return
    try:
        _serve(conn, server, server.address)
    finally:
        server.stop(0)


def _serve_baseline(conn: Connection, responses: Sequence[bytes], append_to: Path | None) -> None:
    # The allocator as lakelog's server sets it (server/allocator.py): the baseline gets every tuning lakelog gets.
    keep_buffers_on_heap(Configuration({}).get("server.malloc.mmap-threshold"))
    with BaselineServer(responses, append_to) as server:
        _serve(conn, server, server.address)


class HostedServer(_Child):
    """A lakelog server in a child process: embedded (coordinator + tablet server) by default, or one
    of the two ``roles`` of a cluster."""

    def __init__(self, config: Mapping[str, Any], roles: tuple[str, ...] = ROLES) -> None:
        self.config = dict(config)  # as given: a restart after a kill starts from it again
        self.conf = Configuration(dict(config))
        self.data_dir = Path(self.conf.get("data.dir")).resolve()
        super().__init__(_serve_lakelog, dict(config), roles)


class HostedBaseline(_Child):
    """The bare grpcio baseline server (bench/grpc_baseline.py) in a child process; with
    ``append_to``, one that appends each produce request to that file."""

    def __init__(self, responses: Sequence[bytes] = (), append_to: Path | None = None) -> None:
        super().__init__(_serve_baseline, list(responses), append_to)

    def __enter__(self) -> "HostedBaseline":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# What a benchmark runs in the lakelog server's process (each takes the ServerProcess first).


def _tablets(server: ServerProcess, table_id: int, buckets: int) -> list[LogTablet]:
    assert server.tablet is not None
    return [server.tablet.logs.get(table_id, bucket) for bucket in range(buckets)]


def log_bytes(server: ServerProcess, table_id: int, buckets: int) -> int:
    """Bytes of the table's record batches on the server's disk: what a full scan moves."""
    return sum(segment.size for tablet in _tablets(server, table_id, buckets) for segment in tablet.segments)


def fetch_responses(server: ServerProcess, table_id: int, buckets: int, per_fetch: int, per_bucket: int) -> list[bytes]:
    """The record bytes of every FetchLog a full scan of the table gets, read the way the server
    reads them: per bucket whole batches up to the client's per-bucket limit, within the per-fetch limit."""
    tablets = _tablets(server, table_id, buckets)
    positions = [0] * len(tablets)
    responses = []
    while any(position < tablet.high_watermark for position, tablet in zip(positions, tablets)):
        budget, parts = per_fetch, []
        for bucket, tablet in enumerate(tablets):
            if positions[bucket] >= tablet.high_watermark or budget <= 0:
                continue
            records = tablet.read(positions[bucket], min(per_bucket, budget)).records
            *_, (_, last) = rb.iter_headers(records)
            positions[bucket] = last.next_offset
            budget -= len(records)
            parts.append(records)
        responses.append(b"".join(parts))
    return responses


def to_remote(server: ServerProcess, table_id: int, buckets: int) -> None:
    """Roll every bucket and upload what is rolled; local copies go (one, empty, segment stays)
    and, for a lake table, remote segments the lake holds expire (``table.log.ttl`` 1ms)."""
    for tablet in _tablets(server, table_id, buckets):
        tablet.roll()
    assert server.tablet is not None
    time.sleep(0.01)  # past the 1ms TTL of the newest record
    for _ in range(2):  # the first pass uploads, the second trims and expires what it uploaded
        report = server.tablet.remote.run_once()
        if report.errors:
            raise report.errors[0]


def remote_pass(server: ServerProcess) -> None:
    """One remote log pass: deletes the remote files of dropped tables."""
    assert server.tablet is not None
    server.tablet.remote.run_once()


def remote_segment_paths(server: ServerProcess, path: TablePath, table_id: int, buckets: int) -> list[str]:
    """The remote storage paths of the table's ``.log`` objects, bucket by bucket, oldest first."""
    assert server.tablet is not None
    remote = server.tablet.remote
    paths = []
    for bucket in range(buckets):
        directory = remote.storage.tablet_dir(path, table_id, bucket)
        for segment in remote.manifest(table_id, bucket).segments:
            paths.append(directory.child(segment.file(".log")).path)
    return paths
