"""The unit tier's guard holds: the network and processes are refused inside it, so a test that
needs a server cannot end up here; what asyncio needs of sockets (a local pair) still works."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import grpc
import pytest



def test_a_network_socket_is_refused() -> None:
    with pytest.raises(AssertionError, match="network socket"):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with pytest.raises(AssertionError, match="network socket"):
        socket.socket()


def test_a_connection_is_refused_before_it_is_tried() -> None:
    with pytest.raises(AssertionError, match="connect"):
        socket.create_connection(("127.0.0.1", 9))


def test_grpc_servers_and_channels_are_refused() -> None:
    with pytest.raises(AssertionError, match="grpc.insecure_channel"):
        grpc.insecure_channel("127.0.0.1:9")
    with pytest.raises(AssertionError, match="grpc.server"):
        grpc.server(None)


def test_a_process_is_refused() -> None:
    with pytest.raises(AssertionError, match="start a process"):
        subprocess.run([sys.executable, "-c", "pass"])


def test_an_event_loop_still_runs_on_its_local_socket_pair() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert asyncio.run(answer()) == 42
