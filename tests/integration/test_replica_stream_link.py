"""A follower's link to its leaders' replica streams (server/rpc/replica_stream_link.py) against a
real stream server on loopback (server/rpc/replica_stream_server.py), whose fetches a small fake of
the tablet service answers, and a fake of the gRPC link it falls back to: answers and refusals
cross the stream, a fetch cut short comes back at once, a stream that cannot be reached is left for
gRPC a while, and connections over the server's cap are refused."""

from __future__ import annotations

import queue
import socket
import threading
import time
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from lakelog.cluster_state import ServerNode
from lakelog.errors import NetworkError, NotLeaderError
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.server.log.log_tablet import LogConfig, LogTablet
from lakelog.server.metrics.server_metrics import ServerMetrics
from lakelog.server.replica.replica_fetcher import FollowedBucket, FollowerFetch, LeaderAnswer
from lakelog.server.rpc.fetch_response import encode_fetch_response
from lakelog.server.rpc.replica_stream_frames import HEADER_SIZE, FrameKind, frame_header, hello, parse_error
from lakelog.server.rpc.replica_stream_link import GRPC_AFTER_STREAM_FAILED_S, ReplicaStreamLink
from lakelog.server.rpc.replica_stream_server import ReplicaStreamServer

SECRET = "unit-secret"
TABLE_ID = 7


class ScriptedService:
    """The tablet service's seam for the stream: answers follower fetches from a queue, holding
    each until its answer is put (an exception is raised instead)."""

    def __init__(self) -> None:
        self.metrics = ServerMetrics()
        self.answers: queue.Queue[bytes | Exception] = queue.Queue()
        self.asked: list[pb.FetchLogRequest] = []

    def answer_follower_fetch(self, request: pb.FetchLogRequest) -> bytes:
        self.asked.append(request)
        answer = self.answers.get(timeout=30)
        if isinstance(answer, Exception):
            raise answer
        return answer


class GrpcSeam:
    """What the stream link needs of the gRPC link: the stream port a leader named, and fetches."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.fetches = 0

    def stream_port(self, leader: ServerNode) -> int:
        return self.port

    def fetch(
        self, leader: ServerNode, follower_id: int, fetches: Sequence[FollowerFetch], max_wait_ms: int, wake: threading.Event
    ) -> list[LeaderAnswer]:
        self.fetches += 1
        return []

    def close(self) -> None:
        """Nothing held."""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fetch(tmp_path: Path) -> Iterator[FollowerFetch]:
    tablet = LogTablet.open(tmp_path / "b0", LogConfig(), 0, "t bucket 0")
    yield FollowerFetch(FollowedBucket(physical_id=TABLE_ID, table_id=TABLE_ID, partition_id=0, bucket=0, leader_epoch=0, tablet=tablet), 0)
    tablet.close()


@pytest.fixture
def service() -> Iterator[tuple[ScriptedService, int]]:
    scripted = ScriptedService()
    server = ReplicaStreamServer(scripted, SECRET)  # type: ignore[arg-type]  # the scripted seam, not a TabletService
    port = server.start("127.0.0.1", 0)
    yield scripted, port
    server.close()


def _answer(records: bytes, high_watermark: int) -> bytes:
    return encode_fetch_response([(TABLE_ID, pb.PbFetchLogRespForBucket(bucket_id=0, high_watermark=high_watermark), records)])


def _link(port: int, clock: Clock | None = None) -> tuple[ReplicaStreamLink, GrpcSeam]:
    grpc = GrpcSeam(port)
    return ReplicaStreamLink(grpc, SECRET, clock or Clock()), grpc  # type: ignore[arg-type]  # the seam of GrpcLeaderLink


def test_answers_and_refusals_cross_the_stream_and_the_connection_goes_on(service: tuple[ScriptedService, int], fetch: FollowerFetch) -> None:
    scripted, port = service
    link, grpc = _link(port)
    leader = ServerNode(1, "127.0.0.1", 1)
    scripted.answers.put(_answer(b"\x01" * 64, 5))
    [answer] = link.fetch(leader, 2, [fetch], 200, threading.Event()) or []
    assert answer.key == (TABLE_ID, 0) and bytes(answer.records) == b"\x01" * 64 and answer.high_watermark == 5
    scripted.answers.put(NotLeaderError("tablet server 1 does not lead t bucket 0"))
    with pytest.raises(NotLeaderError, match="does not lead"):
        link.fetch(leader, 2, [fetch], 200, threading.Event())
    scripted.answers.put(_answer(b"\x02" * 8, 6))
    [answer] = link.fetch(leader, 2, [fetch], 200, threading.Event()) or []
    assert bytes(answer.records) == b"\x02" * 8
    assert grpc.fetches == 0, "a fetch went over gRPC though the stream works"
    assert [r.follower_server_id for r in scripted.asked] == [2, 2, 2] and scripted.asked[0].max_wait_ms == 200
    link.close()


def test_a_fetch_cut_short_comes_back_at_once_and_the_next_one_opens_a_connection(service: tuple[ScriptedService, int], fetch: FollowerFetch) -> None:
    scripted, port = service
    link, _ = _link(port)
    leader = ServerNode(1, "127.0.0.1", 1)
    wake = threading.Event()
    threading.Timer(0.05, wake.set).start()
    assert link.fetch(leader, 2, [fetch], 60_000, wake) is None  # the leader holds it: nothing was put
    scripted.answers.put(_answer(b"", 0))  # the held fetch's answer, to a connection closed meanwhile
    taken_by = time.monotonic() + 10
    while not scripted.answers.empty():  # taken by the held fetch's handler, not by the next fetch's
        assert time.monotonic() < taken_by, "the held fetch's handler never took its answer"
        time.sleep(0.005)
    scripted.answers.put(_answer(b"\x03" * 8, 1))
    [answer] = link.fetch(leader, 2, [fetch], 200, threading.Event()) or []
    assert bytes(answer.records) == b"\x03" * 8
    link.close()


def test_a_stream_not_reachable_is_left_for_grpc_a_while_and_longer_each_time(service: tuple[ScriptedService, int], fetch: FollowerFetch) -> None:
    _, live_port = service
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead_port = closed.getsockname()[1]
    clock = Clock()
    link, grpc = _link(dead_port, clock)
    leader = ServerNode(1, "127.0.0.1", 1)
    assert link.fetch(leader, 2, [fetch], 200, threading.Event()) == []  # over gRPC: the stream refused the connection
    clock.now += GRPC_AFTER_STREAM_FAILED_S + 1
    assert link.fetch(leader, 2, [fetch], 200, threading.Event()) == []  # tried again, refused again: twice as long now
    grpc.port = live_port  # reachable from now on, but not tried before the longer period ends
    clock.now += GRPC_AFTER_STREAM_FAILED_S + 1
    assert link.fetch(leader, 2, [fetch], 200, threading.Event()) == []
    assert grpc.fetches == 3
    clock.now += GRPC_AFTER_STREAM_FAILED_S
    service[0].answers.put(_answer(b"\x04" * 8, 1))
    [answer] = link.fetch(leader, 2, [fetch], 200, threading.Event()) or []
    assert bytes(answer.records) == b"\x04" * 8 and grpc.fetches == 3
    link.close()


def test_a_wrong_secret_is_refused_by_the_leader(service: tuple[ScriptedService, int], fetch: FollowerFetch, caplog: pytest.LogCaptureFixture) -> None:
    scripted, port = service
    grpc = GrpcSeam(port)
    link = ReplicaStreamLink(grpc, "not the secret", Clock())  # type: ignore[arg-type]
    assert link.fetch(ServerNode(1, "127.0.0.1", 1), 2, [fetch], 200, threading.Event()) == []
    assert grpc.fetches == 1, "a refused stream did not leave the fetch to gRPC"
    assert not scripted.asked, "the leader answered a fetch of a connection without the secret"
    refusals = [r.getMessage() for r in caplog.records if "not reachable" in r.getMessage()]
    assert len(refusals) == 1 and "serves cluster members only" in refusals[0], "the follower did not say the leader refused its secret"
    link.close()


def test_connections_over_the_cap_are_refused_and_those_under_it_are_served(fetch: FollowerFetch) -> None:
    scripted = ScriptedService()
    server = ReplicaStreamServer(scripted, SECRET, max_connections=1)  # type: ignore[arg-type]
    port = server.start("127.0.0.1", 0)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as first:
            first.sendall(hello(SECRET))
            assert first.recv(HEADER_SIZE) == frame_header(FrameKind.WELCOME, 0)
            with socket.create_connection(("127.0.0.1", port), timeout=30) as second:
                refused = b""
                while chunk := second.recv(4096):
                    refused += chunk
            error = parse_error(refused[HEADER_SIZE:])
            assert isinstance(error, NetworkError) and "1 connections are open already" in error.message
        deadline = time.monotonic() + 10
        while scripted.metrics.registry.get_sample_value("lakelog_replica_stream_connections") != 0:
            assert time.monotonic() < deadline, "the server never saw the first connection closed"
            time.sleep(0.01)
        scripted.answers.put(_answer(b"\x05" * 8, 1))
        link, _ = _link(port)
        [answer] = link.fetch(ServerNode(1, "127.0.0.1", 1), 2, [fetch], 200, threading.Event()) or []  # the first one gone: served
        assert bytes(answer.records) == b"\x05" * 8
        link.close()
    finally:
        server.close()
