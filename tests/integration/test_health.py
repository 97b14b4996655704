"""Every server answers the standard gRPC health check (docs/contract.md, "Operations"), as probes call it: the
stock ``grpc.health.v1`` stub on a real server, for the embedded server, a coordinator and a
tablet server apart, and a server with token auth (a probe carries no token). The metrics endpoint
names the build."""

from __future__ import annotations

import json
import secrets
import urllib.request
from pathlib import Path
from typing import Callable

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

import lakelog
from lakelog.cli.main import main
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceStub
from lakelog.security.tokens import Action, hash_token
from lakelog.server.server_process import ServerProcess

SERVING = health_pb2.HealthCheckResponse.SERVING
COORDINATOR = "lakelog.rpc.CoordinatorService"
TABLET = "lakelog.rpc.TabletService"


def health_of(address: str, service: str = "") -> int:
    with grpc.insecure_channel(address) as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status


def test_embedded_server_serves_both_services(server: ServerProcess) -> None:
    assert health_of(server.address) == SERVING
    assert health_of(server.address, COORDINATOR) == SERVING
    assert health_of(server.address, TABLET) == SERVING
    with pytest.raises(grpc.RpcError) as unknown:
        health_of(server.address, "lakelog.rpc.NoSuchService")
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


def test_coordinator_and_tablet_server_apart(tmp_path: Path) -> None:
    with ServerProcess({"data.dir": str(tmp_path / "c"), "server.port": 0}, ("coordinator",)) as coordinator:
        tablet_conf = {"data.dir": str(tmp_path / "t"), "server.port": 0, "coordinator.address": coordinator.address}
        with ServerProcess(tablet_conf, ("tablet-server",)) as tablet:
            assert (health_of(coordinator.address), health_of(coordinator.address, COORDINATOR)) == (SERVING, SERVING)
            assert (health_of(tablet.address), health_of(tablet.address, TABLET)) == (SERVING, SERVING)
            with pytest.raises(grpc.RpcError) as not_here:
                health_of(coordinator.address, TABLET)
            assert not_here.value.code() == grpc.StatusCode.NOT_FOUND


def test_health_needs_no_token_where_everything_else_does(server_factory: Callable[..., ServerProcess], tmp_path: Path) -> None:
    token = secrets.token_urlsafe(32)
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(json.dumps({"servers": {"sha256": hash_token(token), "actions": [str(a) for a in Action]}}))
    server = server_factory(**{"security.auth.enabled": "true", "security.auth.tokens-file": str(tokens), "security.auth.token": token})
    assert health_of(server.address) == SERVING
    with grpc.insecure_channel(server.address) as channel, pytest.raises(grpc.RpcError) as refused:
        CoordinatorServiceStub(channel).ListDatabases(pb.ListDatabasesRequest(), timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_metrics_name_the_build(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory(**{"metrics.port": 0})
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as response:
        families = {family.name: family for family in text_string_to_metric_families(response.read().decode())}
    [sample] = families["lakelog_build_info"].samples
    assert (sample.name, sample.labels, sample.value) == ("lakelog_build_info", {"version": lakelog.__version__}, 1.0)
    assert "lakelog_barrier_safe_time_lag_seconds" in families and "lakelog_barrier_safe_time_lag_ms" not in families


def test_lakelog_health_command(server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What the Docker HEALTHCHECK runs: exit 0 and SERVING for a live server, exit 1 and a one-line
    error where nothing listens."""
    assert main(["health", "--bootstrap", server.address]) == 0
    assert capsys.readouterr().out == f"{server.address}: SERVING\n"
    assert main(["health", "--bootstrap", server.address, "--service", TABLET]) == 0
    assert capsys.readouterr().out == f"{server.address} {TABLET}: SERVING\n"
    assert main(["health", "--bootstrap", server.address, "--service", "lakelog.rpc.NoSuchService"]) == 1
    assert capsys.readouterr().err == f"lakelog: InvalidRequestError: server {server.address} has no service 'lakelog.rpc.NoSuchService'\n"
    server.stop(0)
    assert main(["health", "--bootstrap", server.address]) == 1
    assert capsys.readouterr().err.startswith(f"lakelog: ServerUnreachableError: cannot reach server {server.address}")
