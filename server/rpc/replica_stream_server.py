"""The leader's end of the replica stream (:mod:`replica_stream_frames`): a listener beside gRPC,
and a thread per follower connection in which :meth:`TabletService.answer_follower_fetch` answers
its fetches as it answers a follower's FetchLog, long poll included.

A thread each, not the RPC event loop: an ``acks=all`` produce waits for its followers' next
fetches, and each hop between the loop and the RPC threads (to read, to wake a parked fetch, to
send) is a wait behind whatever else the loop and the interpreter's lock are doing; in a thread
of its own a fetch is read, waited for and sent where it arrived, and the socket is written
without the interpreter's lock held while the kernel copies. There are few such threads: only
cluster members connect (a connection that does not open with the cluster secret is refused),
one per follower fetcher, each with one fetch at a time; at most :data:`MAX_CONNECTIONS` at once.
"""

from __future__ import annotations

import hmac
import logging
import socket
import threading
from contextlib import suppress

from google.protobuf.message import DecodeError

from lakelog.errors import AuthorizationError, InvalidRequestError, LakelogError, NetworkError
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.server.rpc.replica_stream_frames import (
    HEADER_SIZE,
    HELLO_SIZE,
    MAX_REQUEST_BYTES,
    FrameKind,
    StreamClosed,
    error_frame,
    frame_header,
    parse_frame_header,
    parse_hello,
    read_exactly,
)
from lakelog.server.rpc.tablet_service import TabletService

log = logging.getLogger(__name__)

HELLO_TIMEOUT_S = 10.0  # a connection that says nothing is dropped after this
REFUSAL_DRAIN_S = 1.0  # how long a refused peer's unread bytes are drained before the connection closes
# A cluster needs one connection per follower fetcher, one from each other tablet server; a thread
# serves each, so beyond this (a peer opening connections without end) they are refused at once.
MAX_CONNECTIONS = 256


class ReplicaStreamServer:
    def __init__(self, service: TabletService, secret: str, max_connections: int = MAX_CONNECTIONS) -> None:
        self._service = service
        self._max_connections = max_connections
        self._secret = secret.encode()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._connections: set[socket.socket] = set()
        self._closed = False
        service.metrics.watch_replica_stream(lambda: len(self._connections))

    def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0 picks a free port) and accept in a thread; the port bound."""
        self._listener = socket.create_server((host, port), backlog=64)
        threading.Thread(target=self._accept, args=(self._listener,), name="replica-stream-accept", daemon=True).start()
        return int(self._listener.getsockname()[1])

    def close(self) -> None:
        """Stop accepting and end every connection (their threads see them closed)."""
        with self._lock:
            self._closed = True
            connections, self._connections = list(self._connections), set()
        if self._listener is not None:
            _shut(self._listener)
        for sock in connections:
            _shut(sock)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                sock, peer = listener.accept()
            except OSError:
                return  # closed
            what = f"replica stream from {peer[0]}:{peer[1]}"
            with self._lock:
                if self._closed:
                    sock.close()
                    return
                full = len(self._connections) >= self._max_connections
                if not full:
                    self._connections.add(sock)
            if full:
                log.warning("%s refused: %d connections are open already", what, self._max_connections)
                with suppress(OSError):
                    sock.settimeout(HELLO_TIMEOUT_S)
                    sock.sendall(error_frame(NetworkError(f"{what} refused: {self._max_connections} connections are open already")))
                sock.close()
                continue
            threading.Thread(target=self._serve, args=(sock, what), name="replica-stream-serve", daemon=True).start()

    def _serve(self, sock: socket.socket, what: str) -> None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(HELLO_TIMEOUT_S)
            self._welcome(sock)
            sock.settimeout(None)
            while True:
                header = parse_frame_header(read_exactly(sock, HEADER_SIZE), MAX_REQUEST_BYTES, what)
                if header.kind is not FrameKind.REQUEST:
                    raise InvalidRequestError(f"{what} sent a {header.kind.name} frame where a REQUEST goes")
                self._answer(sock, _parse_request(read_exactly(sock, header.length), what))
        except StreamClosed as closed:
            log.debug("%s %s", what, "closed" if closed.got == 0 else f"broke: {closed}")
        except (InvalidRequestError, AuthorizationError) as error:
            log.warning("%s refused: %s", what, error.message)
            _refuse(sock, error)
        except socket.timeout:
            log.warning("%s refused: it sent no hello within %.0f s", what, HELLO_TIMEOUT_S)
        except OSError as exc:  # ConnectionError included: the follower went away, or the server stops
            log.debug("%s broke: %s", what, exc)
        except Exception:  # noqa: BLE001 - one connection's failure never stops the listener
            log.exception("%s failed; closing it", what)
        finally:
            with self._lock:
                self._connections.discard(sock)
            sock.close()

    def _welcome(self, sock: socket.socket) -> None:
        secret_length = parse_hello(read_exactly(sock, HELLO_SIZE))
        presented = read_exactly(sock, secret_length) if secret_length else b""
        if not hmac.compare_digest(bytes(presented), self._secret):
            raise AuthorizationError("the replica stream serves cluster members only: the connection did not present the cluster secret")
        sock.sendall(frame_header(FrameKind.WELCOME, 0))

    def _answer(self, sock: socket.socket, request: pb.FetchLogRequest) -> None:
        """One fetch answered; a refusal (not leader, not ready) is an ERROR frame and the stream goes on."""
        try:
            answer = self._service.answer_follower_fetch(request)
        except LakelogError as error:
            sock.sendall(error_frame(error))
            return
        self._service.metrics.count_replica_stream_fetch()
        _send(sock, frame_header(FrameKind.ANSWER, len(answer)), answer)


def _send(sock: socket.socket, header: bytes, body: bytes) -> None:
    """``header`` then ``body``, in one system call when the socket takes it all: an answer's
    header sent apart would be a packet of its own, which the follower wakes up for alone."""
    sent = sock.sendmsg([header, body])
    if sent < len(header):
        sock.sendall(header[sent:])
        sent = len(header)
    if sent - len(header) < len(body):
        sock.sendall(memoryview(body)[sent - len(header) :])


def _refuse(sock: socket.socket, error: LakelogError) -> None:
    """Tell the peer why, before the connection closes. What it sent and was not read is drained
    first (a moment at most): closed with unread bytes, the connection would be reset, and a reset
    can drop the answer before the peer reads it."""
    with suppress(OSError):
        sock.sendall(error_frame(error))
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(REFUSAL_DRAIN_S)
        while sock.recv(65536):
            pass


def _shut(sock: socket.socket) -> None:
    """Closed, with a shutdown first so that a thread blocked on it returns."""
    with suppress(OSError):  # not connected
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def _parse_request(body: bytearray, what: str) -> pb.FetchLogRequest:
    try:
        request = pb.FetchLogRequest.FromString(bytes(body))
    except DecodeError as exc:
        raise InvalidRequestError(f"{what} sent a REQUEST that is not a FetchLogRequest: {exc}") from None
    if not request.HasField("follower_server_id") or request.follower_server_id < 0:
        raise InvalidRequestError(f"{what} sent a FetchLogRequest without a follower_server_id: the stream serves followers only")
    return request
