"""The replica stream's framing (server/rpc/replica_stream_frames.py): what a leader refuses names
what was wrong, and an error crosses the stream as the error it was."""

from __future__ import annotations

import pytest

from lakelog.errors import InvalidRequestError, NotLeaderError
from lakelog.server.rpc.replica_stream_frames import (
    HEADER_SIZE,
    HELLO_SIZE,
    FrameHeader,
    FrameKind,
    error_frame,
    frame_header,
    hello,
    parse_error,
    parse_frame_header,
    parse_hello,
)


def test_a_hello_carries_the_secret_after_its_fixed_part() -> None:
    data = hello("s3cret")
    assert parse_hello(data[:HELLO_SIZE]) == len("s3cret")
    assert data[HELLO_SIZE:] == b"s3cret"


def test_a_connection_that_is_not_a_replica_stream_is_refused_naming_what_it_sent() -> None:
    with pytest.raises(InvalidRequestError, match=r"opened with b'GET '"):
        parse_hello(b"GET / HTTP"[:HELLO_SIZE])
    with pytest.raises(InvalidRequestError, match="version 9 is not spoken here"):
        parse_hello(hello("x")[:4] + bytes([9]) + hello("x")[5:HELLO_SIZE])


def test_a_frame_over_the_limit_or_of_unknown_kind_is_refused() -> None:
    assert parse_frame_header(frame_header(FrameKind.REQUEST, 100), 100, "follower") == FrameHeader(FrameKind.REQUEST, 100)
    with pytest.raises(InvalidRequestError, match="follower sent a REQUEST frame of 101 bytes, more than the 100 allowed"):
        parse_frame_header(frame_header(FrameKind.REQUEST, 101), 100, "follower")
    with pytest.raises(InvalidRequestError, match="unknown kind 77"):
        parse_frame_header(bytes([77]) + bytes(HEADER_SIZE - 1), 100, "follower")


def test_an_error_frame_is_rebuilt_as_the_error_it_carried() -> None:
    frame = error_frame(NotLeaderError("tablet server 2 does not lead t bucket 0"))
    header = parse_frame_header(frame[:HEADER_SIZE], 1 << 20, "leader")
    assert header.kind is FrameKind.ERROR and header.length == len(frame) - HEADER_SIZE
    error = parse_error(frame[HEADER_SIZE:])
    assert isinstance(error, NotLeaderError) and error.message == "tablet server 2 does not lead t bucket 0"
    assert isinstance(parse_error(b"\x00"), InvalidRequestError)
