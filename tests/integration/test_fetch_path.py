"""The shape of the client's read path, measured on a real server: the call stack of every FetchLog a
poll sends, from ``poll()`` down to the tablet gateway, crosses the scanner, the fetcher and the
gateway and nothing else (the answer comes back through the fetch buffer and the collector)."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from types import FrameType
from typing import Any

import lakelog
from tests.harness.tables import create_table, order_rows

CLIENT = Path(lakelog.client.__file__).resolve().parent


def _client_files(frame: FrameType) -> list[str]:
    """The client files on the stack above ``frame``, outermost first, each once."""
    files: list[str] = []
    for caller, _ in traceback.walk_stack(frame):
        path = Path(caller.f_code.co_filename).resolve()
        if path.is_relative_to(CLIENT):
            name = str(path.relative_to(CLIENT))
            if name not in files:
                files.append(name)
    return files[::-1]


def test_a_poll_reaches_the_gateway_through_at_most_four_client_files(conn: lakelog.Connection) -> None:
    table = create_table(conn, buckets=3)
    with table.new_append().create_writer() as writer:
        writer.append_arrow(order_rows(0, 300))
    stacks: list[list[str]] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and code.co_name == "fetch_log" and code.co_filename.endswith("tablet_gateway.py"):
            stacks.append(_client_files(frame))

    with table.new_scan().create_log_scanner() as scanner:
        scanner.subscribe_from_beginning()
        polled = 0
        sys.setprofile(profile)
        try:
            while polled < 300:
                polled += len(scanner.poll(timeout_ms=5000))
        finally:
            sys.setprofile(None)
    assert polled == 300
    assert stacks, "the polls sent fetches"
    for stack in stacks:
        assert stack[0] == "scanner/log_scanner.py" and stack[-1] == "rpc/tablet_gateway.py", stack
        assert len(stack) <= 4, f"a fetch crossed {len(stack)} client files: {stack}"
