"""A follower's fetches over its leaders' replica streams (:mod:`replica_stream_frames`), and over
gRPC where there is none.

A fetch goes over gRPC until the leader's answer names its replica stream's port; from then on
over one stream connection per fetcher, to the leader's host at that port. A stream that cannot be
reached while gRPC can (a proxy or a firewall lets gRPC's port through only) is left for
:data:`GRPC_AFTER_STREAM_FAILED_S` (twice as long each time it fails again), over gRPC meanwhile, so a follower copies its leader whichever
way works; a connection that breaks fails its fetch as a gRPC call that breaks does.

The fetcher's thread reads its answer itself: a thread that read it and woke the fetcher would add
a hand-over to every fetch, which an ``acks=all`` produce waits for. While the leader holds the
fetch, the fetcher checks every :data:`WAKE_CHECK_MS` whether it was cut short (a bucket newly
followed, or close()); one cut short closes its connection (the answer it would get is not
wanted) and the next fetch opens another. Answers are read into the connection's buffer, which the
next answer reuses: the fetcher appends an answer's records before it fetches again.
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from contextlib import suppress
from typing import Callable, Sequence

from lakelog.errors import InvalidRequestError, LakelogError, NetworkError
from lakelog.cluster_state import ServerNode
from lakelog.server.replica.replica_fetcher import FollowedBucket, FollowerFetch, LeaderAnswer
from lakelog.server.rpc.leader_link import MAX_FETCH_BYTES, GrpcLeaderLink, answers_of, fetch_request
from lakelog.server.rpc.replica_stream_frames import (
    HEADER_SIZE,
    FrameKind,
    frame_header,
    hello,
    parse_error,
    parse_frame_header,
    read_exactly,
    read_into,
)

log = logging.getLogger(__name__)

# A stream's connection is opened within this, or the stream counts as not reachable: a firewall
# that drops its packets would otherwise hold each fetch that tries it this long.
CONNECT_TIMEOUT_S = 1.0
# While a fetch waits at its leader, how often it checks whether it was cut short.
WAKE_CHECK_MS = 10
GRPC_AFTER_STREAM_FAILED_S = 30.0  # doubled after each try that fails again, up to MAX_GRPC_AFTER_STREAM_FAILED_S
MAX_GRPC_AFTER_STREAM_FAILED_S = 600.0
# An answer holds at most MAX_FETCH_BYTES of records, plus each bucket's few fields.
MAX_ANSWER_BYTES = MAX_FETCH_BYTES + (4 << 20)


class _StreamConnection:
    """One fetcher's connection to one leader's replica stream, used from that fetcher's thread."""

    def __init__(self, leader: ServerNode, port: int, secret: str) -> None:
        self.leader = (leader.host, port)
        self.what = f"replica stream of leader {leader.server_id} at {leader.host}:{port}"
        self._sock = socket.create_connection((leader.host, port), timeout=CONNECT_TIMEOUT_S)
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock.sendall(hello(secret))
            header = parse_frame_header(read_exactly(self._sock, HEADER_SIZE), MAX_ANSWER_BYTES, self.what)
            if header.kind is FrameKind.ERROR:
                raise parse_error(read_exactly(self._sock, header.length))
            if header.kind is not FrameKind.WELCOME:
                raise InvalidRequestError(f"{self.what} answered the hello with a {header.kind.name} frame")
            self._sock.settimeout(None)
        except BaseException:
            self._sock.close()
            raise
        self._readable = select.poll()
        self._readable.register(self._sock, select.POLLIN)
        self._buffer = bytearray()
        self.closed = False

    def call(self, request: bytes, wake: threading.Event) -> memoryview | None:
        """The answer to ``request``, a view of this connection's buffer (valid until the next
        call); None when ``wake`` was set before it came, and the connection is then closed."""
        self._sock.sendall(frame_header(FrameKind.REQUEST, len(request)) + request)
        while not self._readable.poll(WAKE_CHECK_MS):
            if wake.is_set():
                self.close()
                return None
        header = parse_frame_header(read_exactly(self._sock, HEADER_SIZE), MAX_ANSWER_BYTES, self.what)
        if header.kind is FrameKind.ERROR:
            raise parse_error(read_exactly(self._sock, header.length))
        if header.kind is not FrameKind.ANSWER:
            raise InvalidRequestError(f"{self.what} sent a {header.kind.name} frame where an answer goes")
        if len(self._buffer) < header.length:
            self._buffer = bytearray(header.length)
        body = memoryview(self._buffer)[: header.length]
        read_into(self._sock, body)
        return body

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with suppress(OSError):  # not connected any more
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()


class ReplicaStreamLink:
    """:class:`LeaderLink` over replica streams, gRPC where there is none (see the module)."""

    def __init__(self, grpc_link: GrpcLeaderLink, secret: str | None, clock: Callable[[], float] = time.monotonic) -> None:
        self._grpc = grpc_link
        self._secret = secret
        self._clock = clock
        self._lock = threading.Lock()
        self._connections: dict[int, _StreamConnection] = {}  # by fetcher thread
        # by leader address: its stream could not be reached, gRPC until then, and for how long the last time
        self._grpc_until: dict[str, tuple[float, float]] = {}

    def fetch(
        self, leader: ServerNode, follower_id: int, fetches: Sequence[FollowerFetch], max_wait_ms: int, wake: threading.Event
    ) -> list[LeaderAnswer] | None:
        port = self._grpc.stream_port(leader) if self._secret else 0
        with self._lock:
            over_grpc = not port or self._grpc_until.get(leader.address, (0.0, 0.0))[0] > self._clock()
        if over_grpc:
            return self._grpc.fetch(leader, follower_id, fetches, max_wait_ms, wake)
        try:
            connection = self._connection(leader, port)
        except (OSError, LakelogError) as exc:
            answers = self._grpc.fetch(leader, follower_id, fetches, max_wait_ms, wake)  # raises when the leader is down
            if self._grpc.stream_port(leader) == port:  # the leader is up, its stream is not reachable from here
                self._avoid_stream(leader, port, exc)
            return answers
        try:
            answer = connection.call(fetch_request(follower_id, fetches, max_wait_ms).SerializeToString(), wake)
        except OSError as exc:
            connection.close()
            raise NetworkError(f"{connection.what}: {exc}") from None
        except InvalidRequestError:
            connection.close()  # out of step with the leader: the next fetch starts a new stream
            raise
        return None if answer is None else answers_of(answer, fetches)

    def _connection(self, leader: ServerNode, port: int) -> _StreamConnection:
        """The calling fetcher's connection to ``leader``'s stream, opened anew when it has none to there."""
        me = threading.get_ident()
        with self._lock:
            connection = self._connections.get(me)
        if connection is not None and (connection.closed or connection.leader != (leader.host, port)):
            connection.close()
            connection = None
        if connection is None:
            connection = _StreamConnection(leader, port, self._secret or "")
            with self._lock:
                self._connections[me] = connection
                self._grpc_until.pop(leader.address, None)  # reached: a later failure waits the first period again
        return connection

    def _avoid_stream(self, leader: ServerNode, port: int, exc: Exception) -> None:
        with self._lock:
            last = self._grpc_until.get(leader.address)
            period = GRPC_AFTER_STREAM_FAILED_S if last is None else min(2 * last[1], MAX_GRPC_AFTER_STREAM_FAILED_S)
            self._grpc_until[leader.address] = (self._clock() + period, period)
        log.warning(
            "replica stream of leader %d at %s:%d not reachable (%s): fetching over gRPC for %.0f s",
            leader.server_id, leader.host, port, exc.message if isinstance(exc, LakelogError) else exc, period,
        )

    def done(self) -> None:
        with self._lock:
            connection = self._connections.pop(threading.get_ident(), None)
        if connection is not None:
            connection.close()

    def end_offset_for_epoch(self, leader: ServerNode, bucket: FollowedBucket, epoch: int) -> tuple[int, int]:
        return self._grpc.end_offset_for_epoch(leader, bucket, epoch)

    def close(self) -> None:
        with self._lock:
            connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            connection.close()
        self._grpc.close()
