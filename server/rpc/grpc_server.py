"""Building a gRPC server with lakelog's limits, server reflection (so grpcurl can list and call
every method), the standard ``grpc.health.v1.Health`` service (what Docker, Kubernetes and load
balancers probe) and, when configured, TLS and interceptors (token authentication)."""

from __future__ import annotations

from concurrent import futures
from typing import Any, Callable, Collection, Sequence

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from lakelog.errors import InvalidConfigError
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.channel import channel_options
from lakelog.server.rpc.error_boundary import lenient_parser

HEALTH_SERVICE = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name


def add_servicer(server: grpc.Server, servicer: Any, service_name: str, serialized: Collection[str] = ()) -> None:
    """What the generated ``add_*Servicer_to_server`` does, from the proto's descriptor, except that
    requests that do not parse reach the handler's boundary (INVALID_ARGUMENT, not grpc's INTERNAL)
    and the methods named in ``serialized`` answer bytes they serialized themselves (see
    :mod:`lakelog.server.rpc.fetch_response`)."""
    service = pb.DESCRIPTOR.services_by_name[service_name]
    handlers = {}
    for method in service.methods:
        request, response = (getattr(pb, message.name) for message in (method.input_type, method.output_type))
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            getattr(servicer, method.name),
            request_deserializer=lenient_parser(request),
            response_serializer=bytes if method.name in serialized else response.SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)


def bind_server(
    host: str,
    port: int,
    threads: int,
    max_message_size: int,
    credentials: grpc.ServerCredentials | None = None,
    interceptors: Sequence[grpc.ServerInterceptor] = (),
) -> tuple[grpc.Server, int]:
    """A server bound to its port (``port`` 0 picks a free one), not yet serving: bound first, so a
    port in use fails before the caller opens anything. Plaintext unless ``credentials`` are given."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="rpc"),
        # grpcio sets SO_REUSEPORT by default: a second server would then share the port silently.
        options=[*channel_options(max_message_size), ("grpc.so_reuseport", 0)],
        interceptors=list(interceptors),
    )
    address = f"{host}:{port}"
    try:
        bound = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
    except RuntimeError:  # grpcio's "Failed to bind"
        bound = 0
    if bound == 0:
        raise InvalidConfigError(f"cannot listen on {address}: the port is in use or not an address of this machine")
    return server, bound


def start_server(
    server: grpc.Server, registrations: Sequence[Callable[[grpc.Server], None]], service_names: Sequence[str]
) -> None:
    """Register the services and reflection on a bound server and start it."""
    for register in registrations:
        register(server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [pb.DESCRIPTOR.services_by_name[name].full_name for name in service_names]
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection([*names, HEALTH_SERVICE, reflection.SERVICE_NAME], server)
    server.start()
    for name in ("", *names):  # "": the server as a whole
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
