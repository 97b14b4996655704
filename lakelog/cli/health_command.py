"""`lakelog health`: ask a server's ``grpc.health.v1.Health`` whether it serves; exit 0 if it does.

What the Docker image's HEALTHCHECK and compose's healthchecks run, so the image needs neither
grpcurl nor grpc_health_probe. TLS settings come from the usual ``--config``/``--set``; a health
check needs no token.
"""

from __future__ import annotations

import argparse
from typing import Any

import grpc

from lakelog.cli.common_args import add_connection_arguments, bootstrap_address, client_configuration
from lakelog.errors import InvalidRequestError
from lakelog.rpc.channel import open_channel
from lakelog.rpc.status import error_from_rpc


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("health", help="Check that a server serves (exit 0) or not (exit 1).", description=__doc__.splitlines()[0])
    parser.add_argument("--service", default="", metavar="NAME", help="one service, e.g. lakelog.rpc.TabletService (default: the server as a whole)")
    add_connection_arguments(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from grpc_health.v1 import health_pb2, health_pb2_grpc  # the [server] extra

    address = bootstrap_address(args)
    conf = client_configuration(args)
    with open_channel(address, conf) as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=conf.get("client.request-timeout") / 1000
            )
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                raise InvalidRequestError(f"server {address} has no service {args.service!r}") from None
            raise error_from_rpc(exc, f"server {address}") from None
    print(f"{address}{' ' + args.service if args.service else ''}: {health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)}")
    return 0 if answer.status == health_pb2.HealthCheckResponse.SERVING else 1
