"""A server stopped while calls are in flight ends them quietly: its callers get an error, its
handlers' cleanup runs, and it writes no traceback or warning to its standard error and logs no
ERROR. What an operator stopping a server under its clients' traffic sees is that it stopped."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
import warnings
from typing import Any, Callable

import grpc
import pytest

from lakelog.server.rpc.grpc_server import RpcServer, bind_server
from tests.harness.waiting import wait_until

SERVICE = "lakelog.test.Calls"


def _serving(**methods: Callable[..., Any]) -> tuple[RpcServer, str]:
    server, port = bind_server("127.0.0.1", 0, threads=4, max_message_size=1 << 20, max_concurrent_streams=100)
    handlers = {name: grpc.unary_unary_rpc_method_handler(method) for name, method in methods.items()}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.start()
    return server, f"127.0.0.1:{port}"


def _quiet(err: str, caplog: pytest.LogCaptureFixture) -> None:
    assert "Traceback" not in err and "CancelledError" not in err and "never awaited" not in err, err
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR], caplog.text


def test_a_server_stopped_under_traffic_writes_no_traceback(capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    """Plain handlers busy in the RPC threads when the stop comes: grpc ends each call's bookkeeping
    by itself once the call is cancelled; cut short, it printed a CancelledError traceback per call."""

    def answer(request: bytes, context: grpc.ServicerContext) -> bytes:
        time.sleep(0.002)
        return request

    caplog.set_level(logging.DEBUG)
    for _ in range(3):
        server, address = _serving(Answer=answer)
        answered = 0
        stop = threading.Event()

        def send() -> None:
            nonlocal answered
            with grpc.insecure_channel(address) as channel:
                call = channel.unary_unary(f"/{SERVICE}/Answer")
                while not stop.is_set():
                    for future in [call.future(b"x", timeout=30) for _ in range(40)]:
                        try:
                            future.result()
                            answered += 1
                        except grpc.RpcError:
                            pass

        senders = [threading.Thread(target=send) for _ in range(4)]
        for sender in senders:
            sender.start()
        wait_until(lambda: answered > 200, "the server answering")
        server.stop(0)
        stop.set()
        for sender in senders:
            sender.join(timeout=60)
        assert not any(sender.is_alive() for sender in senders), "every call ended when the server stopped"
    _quiet(capfd.readouterr().err, caplog)


def test_a_plain_handler_that_aborts_while_the_server_stops_aborts_on_a_live_loop(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A handler still running when its call is cancelled ends on its own a moment later, aborting
    as lakelog's error boundary does. The server waits for it: aborting after the event loop closed
    left grpc's abort coroutine never awaited (a RuntimeWarning on the standard error)."""
    entered, release = threading.Event(), threading.Event()
    ended: list[str] = []

    def refuse(request: bytes, context: grpc.ServicerContext) -> bytes:
        entered.set()
        release.wait(30)
        try:
            context.abort(grpc.StatusCode.UNAVAILABLE, "the server is stopping")
        finally:
            ended.append("aborted")
        return request

    server, address = _serving(Refuse=refuse)
    with grpc.insecure_channel(address) as channel:
        future = channel.unary_unary(f"/{SERVICE}/Refuse").future(b"x", timeout=30)
        entered.wait(30)
        threading.Timer(0.2, release.set).start()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            server.stop(0)
            with pytest.raises(grpc.RpcError):
                future.result(timeout=30)
            wait_until(lambda: ended, "the handler ended")
            gc.collect()
    assert ended == ["aborted"]
    assert not [str(warning.message) for warning in caught if "never awaited" in str(warning.message)]
    _quiet(capfd.readouterr().err, caplog)


def test_stop_is_bounded_when_a_handler_will_not_unwind() -> None:
    """A coroutine handler that swallows its cancellation and keeps waiting is cancelled again, so
    a stop ends whatever the handlers do."""
    seen: list[str] = []

    async def stubborn(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        seen.append("parked")
        while True:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                if "swallowed" in seen:
                    seen.append("ended")
                    raise
                seen.append("swallowed")

    server, address = _serving(Stubborn=stubborn)
    with grpc.insecure_channel(address) as channel:
        future = channel.unary_unary(f"/{SERVICE}/Stubborn").future(b"x", timeout=30)
        wait_until(lambda: seen, "the call parked")
        server.stop(0)
        with pytest.raises(grpc.RpcError):
            future.result(timeout=30)
    assert seen == ["parked", "swallowed", "ended"]
