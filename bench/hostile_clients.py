"""Benchmark 9: control RPC latency (p50, p99) while hostile clients press on a tablet server.

The load of a hostile client, shared with tests/system/test_hostile_clients.py: idle long polls (FetchLog on a
table nobody writes, waiting up to 60 s each, re-sent when they end) and FetchLog streams of 8 MiB
answers sent by raw HTTP/2 connections that never read a byte (the server's answers pile up in
its socket buffers, then in its memory). Meanwhile GetServerTime and ListDatabases are timed one
after another, and the server's peak RSS (``VmHWM`` of /proc/<pid>/status) is read at the end.
"""

from __future__ import annotations

import socket
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import pyarrow as pa

import lakelog
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc import lakelog_api_pb2_grpc as pb_grpc

from bench.cluster import BenchCluster
from bench.measure import Result, progress
from bench.server_host import HostedServer
from bench.sizes import Sizes

FETCH_METHOD = "/lakelog.rpc.TabletService/FetchLog"
STREAM_ANSWER_BYTES = 8 << 20
STREAMS_PER_CONNECTION = 10
POLLS_PER_CHANNEL = 20
LONG_POLL_MS = 60_000
BIG_ROW = "x" * 1000
TARGET_P99_MS = 100.0
# A small budget, so the never-read streams hold most of it: each of their 6 connections an eighth.
SERVER_CONFIG = {"server.fetch.max-inflight-bytes": "64mb"}


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _header(name: str, value: str) -> bytes:
    """HPACK "literal header field without indexing, new name", no Huffman (names and values < 127 bytes)."""
    key, text = name.encode(), value.encode()
    return b"\x00" + bytes([len(key)]) + key + bytes([len(text)]) + text


class NeverReadingConnection:
    """An HTTP/2 connection that opens gRPC calls and never reads what the server sends: it grants
    the server the largest flow-control windows, so nothing but the socket limits the server."""

    def __init__(self, host: str, port: int) -> None:
        self._socket = socket.create_connection((host, port))
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self._socket.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        self._socket.sendall(_frame(4, 0, 0, struct.pack(">HI", 4, 2**31 - 1)))  # SETTINGS_INITIAL_WINDOW_SIZE
        self._socket.sendall(_frame(4, 1, 0, b""))  # acknowledge the server's settings unread
        self._socket.sendall(_frame(8, 0, 0, struct.pack(">I", 2**31 - 1 - 65_535)))  # connection window
        self._next_stream = 1

    def call(self, method: str, request: bytes, authority: str) -> None:
        headers = [(":method", "POST"), (":scheme", "http"), (":path", method), (":authority", authority),
                   ("content-type", "application/grpc"), ("te", "trailers")]
        stream, self._next_stream = self._next_stream, self._next_stream + 2
        self._socket.sendall(_frame(1, 4, stream, b"".join(_header(k, v) for k, v in headers)))  # END_HEADERS
        self._socket.sendall(_frame(0, 1, stream, b"\x00" + struct.pack(">I", len(request)) + request))  # END_STREAM

    def close(self) -> None:
        self._socket.close()


def fetch_request(table_id: int, offset: int, max_bytes: int, max_wait_ms: int) -> pb.FetchLogRequest:
    bucket = pb.PbFetchLogReqForBucket(bucket_id=0, fetch_offset=offset, max_fetch_bytes=max_bytes)
    return pb.FetchLogRequest(
        max_bytes=max_bytes, min_bytes=1, max_wait_ms=max_wait_ms,
        tables_req=[pb.PbFetchLogReqForTable(table_id=table_id, buckets_req=[bucket])],
    )


class HostileLoad:
    """``polls`` idle long polls on ``idle_table_id`` (each sent again when answered) and ``streams``
    never-read answers of up to 8 MiB from ``big_table_id``, until :meth:`close`."""

    def __init__(self, address: str, idle_table_id: int, big_table_id: int, polls: int, streams: int) -> None:
        self._address = address
        self._closing = False
        self.poll_answers = 0
        self.poll_failures = 0  # polls that ended in an error before the load was closed
        # A channel of its own each (no shared subchannel): one HTTP/2 connection per channel.
        self._channels = [
            grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
            for _ in range(-(-polls // POLLS_PER_CHANNEL))
        ]
        self._poll_request = fetch_request(idle_table_id, 0, 1 << 20, LONG_POLL_MS).SerializeToString()
        self._polls: list[Any] = []
        for number in range(polls):
            self._poll(self._channels[number // POLLS_PER_CHANNEL])
        host, _, port = address.rpartition(":")
        big = fetch_request(big_table_id, 0, STREAM_ANSWER_BYTES, 0).SerializeToString()
        self._connections = []
        for number in range(streams):
            if number % STREAMS_PER_CONNECTION == 0:
                self._connections.append(NeverReadingConnection(host, int(port)))
            self._connections[-1].call(FETCH_METHOD, big, address)

    def _poll(self, channel: grpc.Channel) -> None:
        if self._closing:
            return
        method = channel.unary_unary(FETCH_METHOD, request_serializer=bytes, response_deserializer=bytes)
        future = method.future(self._poll_request, timeout=LONG_POLL_MS / 1000 + 30)
        future.add_done_callback(lambda done: self._answered(channel, done))
        self._polls.append(future)

    def _answered(self, channel: grpc.Channel, future: Any) -> None:
        """A poll answered is sent again; one that failed (the server went away) is not."""
        if future.cancelled():
            return
        if future.exception() is not None:
            self.poll_failures += not self._closing
            return
        self.poll_answers += 1
        self._poll(channel)

    def close(self) -> None:
        self._closing = True
        for future in self._polls:
            future.cancel()
        for connection in self._connections:
            connection.close()
        for channel in self._channels:
            channel.close()

    def __enter__(self) -> "HostileLoad":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ControlClient:
    """Times control RPCs: GetServerTime (tablet server) and ListDatabases (coordinator)."""

    def __init__(self, address: str) -> None:
        self._channel = grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
        self._tablet = pb_grpc.TabletServiceStub(self._channel)
        self._coordinator = pb_grpc.CoordinatorServiceStub(self._channel)

    def timed_calls(self, count: int, deadline_s: float) -> list[float]:
        """Seconds of each call, alternating the two; a call over ``deadline_s`` raises grpc.RpcError."""
        seconds = []
        for number in range(count):
            started = time.perf_counter()
            if number % 2:
                self._coordinator.ListDatabases(pb.ListDatabasesRequest(), timeout=deadline_s)
            else:
                self._tablet.GetServerTime(pb.GetServerTimeRequest(), timeout=deadline_s)
            seconds.append(time.perf_counter() - started)
        return seconds

    def close(self) -> None:
        self._channel.close()


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (``VmHWM``), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


def big_rows(start: int, count: int) -> pa.RecordBatch:
    """Rows of about 1 KB: a few thousand make an 8 MiB answer."""
    ids = pa.array(range(start, start + count), pa.int64())
    return pa.record_batch([ids, pa.array([BIG_ROW] * count), pa.array([0.5] * count)], names=["id", "name", "amount"])


def prepare_tables(conn: lakelog.Connection, big_rows_count: int) -> tuple[lakelog.Table, lakelog.Table]:
    """An empty table for the long polls, and one with ``big_rows_count`` rows of 1 KB for the streams."""
    conn.admin.create_database("hostile", ignore_if_exists=True)
    tables = []
    for name in ("idle", "big"):
        path = lakelog.TablePath("hostile", name)
        conn.admin.create_table(path, lakelog.TableDescriptor(big_rows(0, 1).schema, 1), ignore_if_exists=True)
        tables.append(conn.get_table(path))
    writer = tables[1].new_append().create_writer()
    for start in range(0, big_rows_count, 2000):
        writer.append_arrow(big_rows(start, min(2000, big_rows_count - start)))
    writer.flush()
    return tables[0], tables[1]


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    """On a server of its own (its RSS is this load's alone), with the budget of SERVER_CONFIG."""
    polls, streams = sizes.hostile_polls, sizes.hostile_streams
    with tempfile.TemporaryDirectory(prefix="lakelog-hostile-") as data_dir:
        server = HostedServer({"data.dir": data_dir, "server.port": 0, **SERVER_CONFIG})
        try:
            with lakelog.connect(server.address) as conn:
                idle, big = prepare_tables(conn, 10_000)
                start_mb = peak_rss_mb(server.pid)
                progress(f"hostile: {polls} idle long polls and {streams} never-read 8 MiB FetchLog streams")
                control = ControlClient(server.address)
                with HostileLoad(server.address, idle.info.table_id, big.info.table_id, polls, streams):
                    time.sleep(2)  # the streams fill the budget and the socket buffers
                    seconds = sorted(control.timed_calls(sizes.lookups * 2, 10.0))
                    peak_mb = peak_rss_mb(server.pid)
                control.close()
        finally:
            server.stop()
    p50, p99 = (seconds[int(q * (len(seconds) - 1))] * 1000 for q in (0.5, 0.99))
    return [
        Result(
            "9", "Control RPC p99 under hostile clients", p99, "ms", None, "", p99, TARGET_P99_MS,
            lower_is_better=True,
            detail=f"{len(seconds)} calls (GetServerTime, ListDatabases), p50 {p50:.1f} ms; {polls} idle long polls, "
            f"{streams} never-read 8 MiB FetchLog streams, {SERVER_CONFIG}; server peak RSS {peak_mb:.0f} MB "
            f"({start_mb:.0f} MB before the load)",
            next_step="control RPCs share the RPC threads and the event loop with reads: a separate pool for them",
        )
    ]
