"""Followers copy their leaders over the replica stream, a plain TCP connection beside gRPC
(server/rpc/replica_stream_*.py), on a real cluster of a coordinator and three tablet server
processes: what they copy, with the stream off, and what the stream refuses while copying goes on."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Iterator

import pytest

from lakelog.errors import AuthorizationError, InvalidRequestError
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.server.rpc.replica_stream_frames import HEADER_SIZE, FrameKind, frame_header, hello, parse_error, parse_frame_header
from tests.harness.replica_cluster import SECRET, ReplicaCluster
from tests.harness.tables import create_table, order_rows, scan_all
from tests.harness.waiting import wait_until

FACTOR_3 = {"table.replication.factor": "3"}
STREAM_FETCHES = "lakelog_replica_stream_fetches_total"
STREAM_CONNECTIONS = "lakelog_replica_stream_connections"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ReplicaCluster]:
    with ReplicaCluster(tmp_path) as cluster:
        yield cluster


def _copy_3000_records(cluster: ReplicaCluster, name: str) -> None:
    """3000 records into a factor-3 table of 3 buckets (one led by each server), every copy in sync, read back."""
    with cluster.connect() as conn:
        table = create_table(conn, name=name, buckets=3, properties=FACTOR_3)
        with table.new_append().create_writer() as writer:
            for start in range(0, 3000, 300):
                writer.append_arrow(order_rows(start, 300))
        described = wait_until(
            lambda: (d := conn.admin.describe_buckets(table.path)) and all(len(i.isr) == 3 for i in d.values()) and d,
            "every bucket's ISR holds all three replicas",
        )
        assert sum(info.high_watermark for info in described.values()) == 3000
        scanner = table.new_scan().create_log_scanner()
        scanner.subscribe_from_beginning()
        assert sorted(scan_all(scanner, 3000).column("id").to_pylist()) == list(range(3000))


def _stream_port(cluster: ReplicaCluster, server_id: int) -> int:
    found = re.search(r"replica stream listening on 127\.0\.0\.1:(\d+)", cluster.tablets[server_id].log_path.read_text())
    assert found, f"tablet server {server_id} logged no replica stream"
    return int(found.group(1))


def _answer_until_closed(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_followers_copy_over_each_leaders_replica_stream(cluster: ReplicaCluster) -> None:
    _copy_3000_records(cluster, "first")  # a follower's first fetch from a leader goes over gRPC and learns the stream
    for server_id in (1, 2, 3):
        # each server leads a bucket of each table, followed by the other two: one connection from each
        wait_until(lambda: cluster.metric(server_id, STREAM_CONNECTIONS) == 2, f"tablet server {server_id}'s two followers connected")
    before = {server_id: cluster.metric(server_id, STREAM_FETCHES) for server_id in (1, 2, 3)}
    _copy_3000_records(cluster, "streamed")
    wait_until(lambda: len({cluster.log_bytes(server_id) for server_id in (1, 2, 3)}) == 1, "every server holds the same bytes")
    for server_id in (1, 2, 3):
        assert cluster.metric(server_id, STREAM_FETCHES) > before[server_id], f"tablet server {server_id} answered no fetch over its stream"
        # a fetch cut short (a bucket newly followed) drops its connection; the leader's end closes within a fetch wait
        wait_until(lambda: cluster.metric(server_id, STREAM_CONNECTIONS) == 2, f"tablet server {server_id}'s connections settled at two")
        assert "over gRPC" not in cluster.tablets[server_id].log_path.read_text()


def test_with_the_stream_off_followers_copy_over_grpc(tmp_path: Path) -> None:
    with ReplicaCluster(tmp_path, tablet_settings={"server.replica-stream.port": "-1"}) as cluster:
        _copy_3000_records(cluster, "over_grpc")
        for server_id in (1, 2, 3):
            assert "replica stream listening" not in cluster.tablets[server_id].log_path.read_text()
            assert cluster.metric(server_id, STREAM_FETCHES) == 0


def test_a_stream_connection_without_the_secret_or_speaking_another_protocol_is_refused_and_copying_goes_on(cluster: ReplicaCluster) -> None:
    port = _stream_port(cluster, 1)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(hello("not the cluster secret"))
        answer = _answer_until_closed(sock)
    assert parse_frame_header(answer[:HEADER_SIZE], 1 << 20, "leader").kind is FrameKind.ERROR
    assert isinstance(parse_error(answer[HEADER_SIZE:]), AuthorizationError)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        refused = parse_error(_answer_until_closed(sock)[HEADER_SIZE:])
    assert isinstance(refused, InvalidRequestError) and "not a lakelog replica stream" in refused.message
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(hello(SECRET))
        request = pb.FetchLogRequest(max_bytes=100).SerializeToString()  # a client's fetch: no follower id
        sock.sendall(frame_header(FrameKind.REQUEST, len(request)) + request)
        answer = _answer_until_closed(sock)
    assert parse_frame_header(answer[:HEADER_SIZE], 0, "leader").kind is FrameKind.WELCOME
    assert "without a follower_server_id" in parse_error(answer[2 * HEADER_SIZE :]).message
    log = cluster.tablets[1].log_path.read_text()
    assert "refused: the replica stream serves cluster members only" in log
    assert "refused: not a lakelog replica stream" in log
    _copy_3000_records(cluster, "after_refusals")
    wait_until(lambda: cluster.metric(1, STREAM_FETCHES) > 0, "tablet server 1 answering its followers over the stream")
