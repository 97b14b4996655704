"""Building a gRPC server with lakelog's limits and server reflection (so grpcurl can list and call
every method)."""

from __future__ import annotations

from concurrent import futures
from typing import Callable, Sequence

import grpc
from grpc_reflection.v1alpha import reflection

from lakelog.errors import InvalidConfigError
from lakelog.rpc import lakelog_api_pb2 as pb


def channel_options(max_message_size: int) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", max_message_size),
        ("grpc.max_receive_message_length", max_message_size),
    ]


def build_server(
    host: str,
    port: int,
    threads: int,
    max_message_size: int,
    registrations: Sequence[Callable[[grpc.Server], None]],
    service_names: Sequence[str],
) -> tuple[grpc.Server, int]:
    """A started server and the port it bound (``port`` 0 picks a free one)."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="rpc"),
        options=channel_options(max_message_size),
    )
    for register in registrations:
        register(server)
    names = [pb.DESCRIPTOR.services_by_name[name].full_name for name in service_names]
    reflection.enable_server_reflection([*names, reflection.SERVICE_NAME], server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise InvalidConfigError(f"cannot listen on {host}:{port} (in use, or not an address of this machine)")
    server.start()
    return server, bound
