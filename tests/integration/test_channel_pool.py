"""The client's channels (lakelog/rpc/channel.py) against a real server on loopback."""

from __future__ import annotations

import threading

import grpc

import lakelog
from lakelog.config import Configuration
from lakelog.errors import LakelogError
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.channel import ChannelPool
from tests.harness.tables import create_table


def test_closing_the_pool_while_a_cancelled_call_sends_again_does_not_hang(server_factory) -> None:
    """Closing a channel cancels its calls and waits for their callbacks; a scanner's callback
    sends its next fetch at once, asking the pool for the channel. The pool closed under its lock,
    so that callback waited for the lock and the close for the callback: a connection closed with
    a scanner still reading hung for good (seen in a test that left a scanner open). The callback
    now gets "the connection is closed" and the close returns."""
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        table_id = create_table(conn).info.table_id
    pool = ChannelPool(Configuration({}))
    fetch_log = pool.get(server.address).unary_unary(
        "/lakelog.rpc.TabletService/FetchLog", request_serializer=pb.FetchLogRequest.SerializeToString
    )
    request = pb.FetchLogRequest(
        max_bytes=1 << 20,
        min_bytes=1,
        max_wait_ms=30_000,
        tables_req=[pb.PbFetchLogReqForTable(table_id=table_id, buckets_req=[pb.PbFetchLogReqForBucket(bucket_id=0, fetch_offset=0, max_fetch_bytes=1 << 20)])],
    )
    # Two long polls (the log is empty: the server holds each for 30 s), as two scanners leave them.
    parked = [fetch_log.future(request) for _ in range(2)]
    sent_again: list[str] = []
    both_sent = threading.Semaphore(0)

    def send_again(call: grpc.Future) -> None:
        try:
            pool.get(server.address)
        except LakelogError as error:
            sent_again.append(str(error))
        both_sent.release()

    for call in parked:
        call.add_done_callback(send_again)
    closing = threading.Thread(target=pool.close, daemon=True)
    closing.start()
    closing.join(15)
    assert not closing.is_alive(), "closing the pool hung on a call's callback"
    assert all(both_sent.acquire(timeout=15) for _ in parked)
    assert all(call.code() == grpc.StatusCode.CANCELLED for call in parked)
    assert sent_again == ["the connection is closed"] * 2
