"""Security end to end: TLS on both services and bearer-token authentication, against real servers
on loopback with certificates made at runtime (tests/harness/certificates.py)."""

from __future__ import annotations

import json
import logging
import re
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import grpc
from cryptography import x509
import pytest
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

import lakelog
from lakelog.config import Configuration
from lakelog.errors import AuthenticationError, AuthorizationError, InvalidConfigError, LakelogError, TlsError
from lakelog.record.schema_bytes import schema_to_bytes
from lakelog.record.batch import encode_batch
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.channel import open_channel
from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceStub
from lakelog.rpc.status import ERROR_CODE_KEY, error_from_rpc
from lakelog.security.tokens import Action, Principal, TokenStore, hash_token
from lakelog.server.metrics.server_metrics import ServerMetrics
from lakelog.server.rpc.auth_interceptor import RPC_ACTIONS, AuthInterceptor
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.harness.certificates import CertificateAuthority, ServerCertificate
from tests.harness.lake_tier import LAKE_TABLE, REMOTE_TIER, expire_remote, wait_for_remote
from tests.harness.replica_cluster import ReplicaCluster
from tests.harness.tables import ORDERS_SCHEMA, create_table, order_rows, produce_orders, scan_all
from tests.harness.waiting import wait_until

METHODS: list[tuple[str, MethodDescriptor]] = [
    (f"/{service.full_name}/{method.name}", method)
    for service in pb.DESCRIPTOR.services_by_name.values()
    for method in service.methods
]
# Who holds which token: "all" sets tests up and inspects state; "all-but-X" holds every action but X.
GRANTS: dict[str, list[Action]] = {
    "all": list(Action),
    "servers": [Action.INTERNAL, Action.READ],
    "reader": [Action.READ],
    "tiering": [Action.READ, Action.TIER],
    **{f"all-but-{action}": [other for other in Action if other != action] for action in Action},
}


@dataclass
class Security:
    ca: CertificateAuthority
    other_ca: CertificateAuthority
    cert: ServerCertificate
    tokens_file: Path
    tokens: dict[str, str]  # token name -> token

    def server_config(self, data_dir: Path, token: str = "servers", **extra: Any) -> dict[str, Any]:
        return {
            "data.dir": str(data_dir),
            "server.port": 0,
            "security.tls.enabled": "true",
            "security.tls.cert-file": str(self.cert.cert_file),
            "security.tls.key-file": str(self.cert.key_file),
            "security.tls.ca-file": str(self.ca.ca_file),
            "security.auth.enabled": "true",
            "security.auth.tokens-file": str(self.tokens_file),
            "security.auth.token": self.tokens[token],
            **extra,
        }

    def client_config(self, token: str | None = "all", ca_file: Path | None = None, **extra: Any) -> dict[str, Any]:
        """``token``: a name of :data:`GRANTS`, a literal token when it is none of them, or no token."""
        config: dict[str, Any] = {"security.tls.enabled": "true", "security.tls.ca-file": str(ca_file or self.ca.ca_file), **extra}
        if token is not None:
            config["security.auth.token"] = self.tokens.get(token, token)
        return config


@pytest.fixture(scope="module")
def security(tmp_path_factory: pytest.TempPathFactory) -> Security:
    directory = tmp_path_factory.mktemp("security")
    ca = CertificateAuthority(directory, "lakelog-test")
    tokens = {name: secrets.token_urlsafe(32) for name in GRANTS}
    tokens_file = directory / "tokens.yaml"
    # JSON is YAML: written as JSON here, the README shows the YAML form.
    tokens_file.write_text(
        json.dumps({name: {"sha256": hash_token(tokens[name]), "actions": [str(a) for a in actions]} for name, actions in GRANTS.items()})
    )
    return Security(ca, CertificateAuthority(directory, "unrelated"), ca.issue("server"), tokens_file, tokens)


def _assert_no_secret(text: str, security: Security) -> None:
    for name, token in security.tokens.items():
        assert token not in text, f"token {name} leaked"
        assert hash_token(token) not in text, f"hash of token {name} leaked"
    assert security.cert.key_file.read_text().splitlines()[1] not in text, "the private key leaked"


# ---------------------------------------------------------------- the metrics port


def test_metrics_need_a_read_token_as_the_status_page_does(
    server_factory: Callable[..., ServerProcess], security: Security, tmp_path: Path
) -> None:
    """With auth on, ``/metrics`` answers 401 (asking for the token) without one or with an unknown
    one, 403 to a token without ``read``, and the samples to a ``read`` token, as ``/status`` does."""
    import ssl
    import urllib.error
    import urllib.request

    server = server_factory(**security.server_config(tmp_path / "data", **{"metrics.port": 0}))
    trusted = ssl.create_default_context(cafile=str(security.ca.ca_file))
    base = f"https://localhost:{server.metrics_port}"

    def get(path: str, token: str | None) -> tuple[int, str]:
        headers = {"Authorization": f"Bearer {security.tokens.get(token, token)}"} if token else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(base + path, headers=headers), timeout=10, context=trusted) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read().decode()

    for path in ("/metrics", "/status.json"):
        status, body = get(path, None)
        assert status == 401 and "requires a bearer token" in body, path
        assert get(path, secrets.token_urlsafe(24))[0] == 401, path
        assert get(path, f"all-but-{Action.READ}")[0] == 403, path
        status, body = get(path, "reader")
        assert status == 200, path
    assert "lakelog_rpc_duration_seconds" in get("/metrics", "reader")[1]


# ---------------------------------------------------------------- TLS


def test_tls_round_trip(server_factory: Callable[..., ServerProcess], security: Security, tmp_path: Path) -> None:
    tls_only = {k: v for k, v in security.server_config(tmp_path / "data").items() if not k.startswith("security.auth.")}
    server = server_factory(**tls_only)
    with lakelog.connect(server.address, security.client_config(token=None)) as conn:
        table = create_table(conn, buckets=2)
        produce_orders(table, 0, 3000)
        scanner = table.new_scan().create_log_scanner()
        scanner.subscribe_from_beginning()
        assert sorted(scan_all(scanner, 3000).column("id").to_pylist()) == list(range(3000))
    # A plaintext client gets nothing from a TLS port.
    with lakelog.connect(server.address, {"client.request-timeout": "3s"}) as plain, pytest.raises(LakelogError):
        plain.admin.list_databases()


def test_a_client_with_the_wrong_ca_is_refused_with_a_clear_error(
    server_factory: Callable[..., ServerProcess], security: Security, tmp_path: Path
) -> None:
    tls_only = {k: v for k, v in security.server_config(tmp_path / "data").items() if not k.startswith("security.auth.")}
    server = server_factory(**tls_only)
    with lakelog.connect(server.address, security.client_config(token=None, ca_file=security.other_ca.ca_file)) as conn:
        with pytest.raises(TlsError) as refused:
            conn.admin.list_databases()
    assert f"coordinator {server.address}" in refused.value.message
    assert "TLS handshake" in refused.value.message and "certificate" in refused.value.message
    assert not refused.value.retriable


def test_a_tls_client_of_a_plaintext_server_is_told_so(server: ServerProcess, security: Security) -> None:
    with lakelog.connect(server.address, security.client_config(token=None)) as conn:
        with pytest.raises(TlsError, match=f"TLS handshake with coordinator {server.address} failed"):
            conn.admin.list_databases()


def test_tls_configuration_errors_name_the_key_not_the_contents(security: Security, tmp_path: Path) -> None:
    base = security.server_config(tmp_path / "data")
    not_pem = tmp_path / "not-a-key.pem"
    not_pem.write_text("secret-but-not-pem")
    for change, message in [
        ({"security.tls.key-file": ""}, "security.tls.enabled needs security.tls.key-file"),
        ({"security.tls.key-file": str(tmp_path / "missing.pem")}, "security.tls.key-file: cannot read"),
        ({"security.tls.cert-file": str(not_pem)}, "is not a PEM file"),
        ({"security.auth.tokens-file": ""}, "security.auth.enabled needs security.auth.tokens-file"),
    ]:
        with pytest.raises(InvalidConfigError, match=message) as refused:
            ServerProcess({**base, **change}).start()
        assert "secret-but-not-pem" not in refused.value.message
    assert not (tmp_path / "data").exists(), "a bad security setting fails before anything opens"


# ---------------------------------------------------------------- the tokens file


def test_the_action_table_names_every_rpc_of_both_services() -> None:
    assert set(RPC_ACTIONS) == {path for path, _ in METHODS}


def test_a_tokens_file_is_checked_at_load(tmp_path: Path) -> None:
    good = {"sha256": hash_token("t"), "actions": ["read"]}
    for content, message in [
        ("just text", "must map token names"),
        ("{a: {sha256: abc, actions: [read]}}", "sha256 must be 64 hex digits"),
        (json.dumps({"a": {**good, "actions": ["read", "fly"]}}), "actions must be among read, write, admin, tier, internal"),
        (json.dumps({"a": {**good, "actions": []}}), "actions must be a non-empty list"),
        (json.dumps({"a": {**good, "token": "t"}}), "needs exactly the keys sha256 and actions"),
        (json.dumps({"a": good, "b": good}), "tokens 'a' and 'b' are the same token"),
    ]:
        path = tmp_path / "tokens.yaml"
        path.write_text(content)
        with pytest.raises(InvalidConfigError, match=message):
            TokenStore.load(path)
    path.write_text(json.dumps({"a": good}))
    principal = TokenStore.load(path).authenticate("Bearer t")
    assert (principal.name, principal.actions) == ("a", frozenset({Action.READ}))


def test_a_method_without_an_action_is_refused_to_every_token() -> None:
    interceptor = AuthInterceptor(TokenStore({hash_token("t"): Principal("all", frozenset(Action))}), ServerMetrics())
    interceptor.check("/lakelog.rpc.TabletService/ProduceLog", "Bearer t")
    with pytest.raises(AuthorizationError, match="has no required action"):
        interceptor.check("/lakelog.rpc.TabletService/NotYetInTheTable", "Bearer t")


def test_the_readme_documents_the_tokens_file_and_every_rpc_action(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("\n## Security\n", 1)[1].split("\n## ", 1)[0]
    example = tmp_path / "tokens.yaml"
    example.write_text(section.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert TokenStore.load(example).authenticate("Bearer foo").name == "analyst"
    method_names = {path.rsplit("/", 1)[1] for path, _ in METHODS}
    documented = {
        name: Action(row.split("`")[1])
        for row in section.splitlines()
        if row.startswith("| `") and row.split("`")[1] in set(Action)
        for name in re.findall(r"[A-Z][A-Za-z]+", row.split("|")[2])
        if name in method_names
    }
    assert documented == {path.rsplit("/", 1)[1]: action for path, action in RPC_ACTIONS.items()}


# ---------------------------------------------------------------- every RPC, refused


@dataclass
class Guarded:
    server: ServerProcess
    admin: lakelog.Connection  # holds every action
    path: lakelog.TablePath
    table_id: int


@pytest.fixture(scope="module")
def guarded(security: Security, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guarded]:
    """A TLS + token server with a lake-enabled table holding a few records and no lake snapshot."""
    server = ServerProcess(security.server_config(tmp_path_factory.mktemp("guarded"))).start()
    conn = lakelog.connect(server.address, security.client_config("all"))
    table = create_table(conn, buckets=2, properties=LAKE_TABLE)
    produce_orders(table, 0, 100)
    yield Guarded(server, conn, table.path, table.info.table_id)
    conn.close()
    server.stop(0)


def _probe(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except LakelogError as error:
        return type(error).__name__


def _state(guarded: Guarded, security: Security) -> dict[str, Any]:
    """Everything a refused call could have changed, read with a token that may read it all."""
    admin, path = guarded.admin.admin, guarded.path
    with open_channel(guarded.server.address, Configuration(security.client_config("all"))) as channel:
        metadata = CoordinatorServiceStub(channel).GetMetadata(pb.MetadataRequest(), timeout=10)
    return {
        "databases": _probe(lambda: {db: sorted(admin.list_tables(db)) for db in admin.list_databases()}),
        "table": _probe(lambda: admin.get_table_info(path)),
        "tablet servers": sorted(str(node) for node in metadata.tablet_servers),
        "buckets": _probe(lambda: admin.describe_buckets(path)),  # leader and every tier's offsets
        "earliest": _probe(lambda: admin.list_offsets(path, spec=lakelog.OffsetSpec.earliest())),
        "lake snapshot": _probe(lambda: admin.get_lake_snapshot(path)),
        "tiering jobs": _probe(admin.get_tiering_jobs),
    }


def _requests(guarded: Guarded) -> dict[str, Message]:
    """Requests that would change something (or read data) if they got through; an RPC not listed
    here is called with its empty request, so a new RPC is covered without editing this test."""
    path = pb.PbTablePath(database_name=guarded.path.database, table_name=guarded.path.table)
    table_id = guarded.table_id
    return {
        "CreateDatabase": pb.CreateDatabaseRequest(database_name="intruder"),
        "DropDatabase": pb.DropDatabaseRequest(database_name=guarded.path.database, cascade=True),
        "CreateTable": pb.CreateTableRequest(
            table_path=pb.PbTablePath(database_name=guarded.path.database, table_name="intruder"),
            schema=schema_to_bytes(ORDERS_SCHEMA),
            bucket_count=1,
        ),
        "DropTable": pb.DropTableRequest(table_path=path),
        "RegisterTabletServer": pb.RegisterTabletServerRequest(server=pb.PbServerNode(node_id=7, host="127.0.0.1", port=1)),
        "CommitLakeTableSnapshot": pb.CommitLakeTableSnapshotRequest(
            tables_req=[
                pb.PbLakeTableSnapshotInfo(
                    table_id=table_id,
                    snapshot_id=1,
                    buckets_req=[pb.PbLakeTableOffsetForBucket(bucket_id=0, log_start_offset=0, log_end_offset=1, log_max_timestamp=1)],
                )
            ]
        ),
        "TieringHeartbeat": pb.TieringHeartbeatRequest(job_id="intruder", tables=[path], barrier=1),
        "ProduceLog": pb.ProduceLogRequest(
            acks=-1,
            table_id=table_id,
            timeout_ms=10_000,
            buckets_req=[pb.PbProduceLogReqForBucket(bucket_id=0, records=encode_batch(order_rows(0, 5), schema_id=1))],
        ),
        "FetchLog": pb.FetchLogRequest(
            max_bytes=1 << 20,
            tables_req=[
                pb.PbFetchLogReqForTable(
                    table_id=table_id, buckets_req=[pb.PbFetchLogReqForBucket(bucket_id=0, fetch_offset=0, max_fetch_bytes=1 << 20)]
                )
            ],
        ),
        "NotifyLeaderAndIsr": pb.NotifyLeaderAndIsrRequest(dropped_table_id=[table_id]),
        "NotifyLakeTableOffset": pb.NotifyLakeTableOffsetRequest(
            notify_buckets_req=[
                pb.PbNotifyLakeTableOffsetReqForBucket(
                    table_id=table_id, bucket_id=0, snapshot_id=9, log_start_offset=0, log_end_offset=2, log_max_timestamp=1
                )
            ]
        ),
    }


def _call(guarded: Guarded, config: dict[str, Any], path: str, request: Message) -> grpc.RpcError | None:
    with open_channel(guarded.server.address, Configuration(config)) as channel:
        call = channel.unary_unary(path, request_serializer=lambda m: m.SerializeToString(), response_deserializer=lambda b: b)
        try:
            call(request, timeout=10)
        except grpc.RpcError as exc:
            return exc
    return None


@pytest.mark.parametrize(("path", "method"), METHODS, ids=[path for path, _ in METHODS])
def test_every_rpc_is_refused_without_the_right_token_and_changes_nothing(
    guarded: Guarded, security: Security, path: str, method: MethodDescriptor, caplog: pytest.LogCaptureFixture
) -> None:
    request = _requests(guarded).get(method.name) or getattr(pb, method.input_type.name)()
    lacking = f"all-but-{RPC_ACTIONS[path]}"
    before = _state(guarded, security)
    cases = [
        (None, grpc.StatusCode.UNAUTHENTICATED, AuthenticationError),
        (secrets.token_urlsafe(32), grpc.StatusCode.UNAUTHENTICATED, AuthenticationError),
        (lacking, grpc.StatusCode.PERMISSION_DENIED, AuthorizationError),
    ]
    registry = guarded.server.metrics.registry

    def refusals(error: type[LakelogError], code: grpc.StatusCode) -> float:
        labels = {"method": method.name, "error": error.__name__, "code": str(error.code), "grpc_status": code.name}
        return registry.get_sample_value("lakelog_rpc_errors_total", labels) or 0.0

    counted = [refusals(error, code) for _, code, error in cases]
    with caplog.at_level(logging.INFO):
        for token, code, error in cases:
            refused = _call(guarded, security.client_config(token), path, request)
            assert refused is not None, f"{path} went through with token {token and security.tokens.get(token, 'wrong')}"
            assert refused.code() == code
            assert (ERROR_CODE_KEY, str(error.code)) in (refused.trailing_metadata() or ())
            assert isinstance(error_from_rpc(refused, "x"), error)
            _assert_no_secret(refused.details() or "", security)
            assert _state(guarded, security) == before
    assert [refusals(error, code) for _, code, error in cases] == [counted[0] + 2, counted[1] + 2, counted[2] + 1]
    assert f"refused {path}: token '{lacking}' may not call {path}" in caplog.text
    _assert_no_secret(caplog.text, security)


def test_the_refused_requests_would_have_changed_something(
    server_factory: Callable[..., ServerProcess], security: Security, tmp_path: Path
) -> None:
    """The control of the test above: with the right token each request does change the state, so
    an unchanged state there means the call was stopped, not that it was harmless."""
    server = server_factory(**security.server_config(tmp_path / "data"))
    with lakelog.connect(server.address, security.client_config("all")) as conn:
        table = create_table(conn, buckets=2, properties=LAKE_TABLE)
        produce_orders(table, 0, 100)
        subject = Guarded(server, conn, table.path, table.info.table_id)
        requests = _requests(subject)
        # Drops last: each call must find what it changes still there.
        order = [n for n in requests if not n.startswith(("Drop", "NotifyLeader"))] + ["NotifyLeaderAndIsr", "DropTable", "DropDatabase"]
        for name in order:
            path = next(p for p, m in METHODS if m.name == name)
            before = _state(subject, security)
            assert _call(subject, security.client_config("all"), path, requests[name]) is None, name
            if name != "FetchLog":
                assert _state(subject, security) != before, f"{name} changed nothing"


def test_the_client_raises_the_errors_and_never_shows_a_token(
    guarded: Guarded, security: Security, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        with lakelog.connect(guarded.server.address, security.client_config(token=None)) as anonymous:
            with pytest.raises(AuthenticationError, match="requires a bearer token"):
                anonymous.admin.list_databases()
        with lakelog.connect(guarded.server.address, security.client_config("reader")) as reader:
            with pytest.raises(AuthorizationError, match="token 'reader' may not call .*CreateDatabase: it needs 'admin'"):
                reader.admin.create_database("intruder")
            table = reader.get_table(guarded.path)
            with pytest.raises(AuthorizationError, match="InitWriter: it needs .write."):  # a writer id is the first write call
                with table.new_append().create_writer() as writer:
                    writer.append_arrow(order_rows(0, 10))
            scanner = table.new_scan().create_log_scanner()
            scanner.subscribe_from_beginning()
            assert scan_all(scanner, 100).num_rows == 100
        with lakelog.connect(guarded.server.address, security.client_config("all-but-read")) as blind:
            with pytest.raises(AuthorizationError, match="GetMetadata: it needs 'read'"):
                blind.get_table(guarded.path)
        # GetLakeConfig is readable by every reader; it carries no security key.
        with lakelog.connect(guarded.server.address, security.client_config("reader")) as reader:
            _assert_no_secret(repr(reader.admin.get_lake_config()), security)
    _assert_no_secret(caplog.text, security)
    shown = repr(Configuration(security.client_config("all")).items())
    assert "'security.auth.token': '<secret>'" in shown
    _assert_no_secret(shown, security)


def test_the_cli_takes_its_token_from_a_config_file(guarded: Guarded, security: Security, tmp_path: Path) -> None:
    """A token in ``--config`` stays out of the process list, unlike ``--set``."""
    client_yaml = tmp_path / "client.yaml"
    client_yaml.write_text(json.dumps(security.client_config("reader")))  # JSON is YAML
    command = [sys.executable, "-m", "lakelog", "offsets", str(guarded.path), "--output", "json", "--bootstrap", guarded.server.address]
    allowed = subprocess.run([*command, "--config", str(client_yaml)], capture_output=True, text=True, timeout=60)
    assert allowed.returncode == 0, allowed.stderr
    latest = guarded.admin.admin.list_offsets(guarded.path, spec=lakelog.OffsetSpec.latest())
    assert json.loads(allowed.stdout) == [{"bucket": bucket, "offset": offset} for bucket, offset in sorted(latest.items())]
    refused = subprocess.run(command + ["--set", "security.tls.enabled=true", "--set", f"security.tls.ca-file={security.ca.ca_file}"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "token" in refused.stderr.lower()


def test_reflection_needs_a_valid_token_but_no_action(guarded: Guarded, security: Security) -> None:
    with open_channel(guarded.server.address, Configuration(security.client_config(token=None))) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            ProtoReflectionDescriptorDatabase(channel).get_services()
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with open_channel(guarded.server.address, Configuration(security.client_config("all-but-read"))) as channel:
        services = set(ProtoReflectionDescriptorDatabase(channel).get_services())
    assert {"lakelog.rpc.CoordinatorService", "lakelog.rpc.TabletService"} <= services


def test_the_server_logs_that_security_is_on_without_secrets(
    server_factory: Callable[..., ServerProcess], security: Security, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        server_factory(**security.server_config(tmp_path / "data"))
    expected = f"security: TLS on (certificate {security.cert.cert_file}), token authentication on ({len(GRANTS)} tokens from {security.tokens_file})"
    assert expected in caplog.text
    _assert_no_secret(caplog.text, security)
    result = subprocess.run([sys.executable, "-m", "lakelog", "config"], capture_output=True, text=True, check=True)
    assert "security.auth.token" in result.stdout


# ---------------------------------------------------------------- servers calling servers


def test_a_tablet_server_without_the_internal_action_cannot_join(security: Security, tmp_path: Path) -> None:
    coordinator = ServerProcess(security.server_config(tmp_path / "c"), ("coordinator",)).start()
    tablet = ServerProcess(
        security.server_config(tmp_path / "t", token="reader", **{"coordinator.address": coordinator.address}), ("tablet-server",)
    )
    try:
        with pytest.raises(AuthorizationError, match="token 'reader' may not call .*RegisterTabletServer"):
            tablet.start()
    finally:
        tablet.stop(0)
        coordinator.stop(0)


def _start_cli(role: str, config_file: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "lakelog", role, "--config", str(config_file), "--port", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "listening on" in line:
            return proc, line.rsplit(" ", 1)[1].strip()
    raise AssertionError(f"{role} exited with {proc.wait()}: {proc.stderr.read() if proc.stderr else ''}")


def test_a_coordinator_and_a_tablet_server_apart_with_tls_and_auth(security: Security, tmp_path: Path) -> None:
    """`lakelog coordinator` and `lakelog tablet-server` from one YAML file of security keys."""
    import yaml

    config_file = tmp_path / "lakelog.yaml"
    settings = {k: v for k, v in security.server_config(tmp_path).items() if k.startswith("security.")}
    config_file.write_text(yaml.safe_dump(settings))
    started: list[subprocess.Popen[str]] = []
    try:
        coordinator, address = _start_cli("coordinator", config_file, "--data-dir", str(tmp_path / "c"))
        started.append(coordinator)
        tablet, _ = _start_cli("tablet-server", config_file, "--data-dir", str(tmp_path / "t"), "--coordinator", address)
        started.append(tablet)
        with lakelog.connect(address, security.client_config("all")) as conn:
            table = create_table(conn, buckets=2)
            produce_orders(table, 0, 1000)
            scanner = table.new_scan().create_log_scanner()
            scanner.subscribe_from_beginning()
            assert scan_all(scanner, 1000).num_rows == 1000
    finally:
        for proc in reversed(started):
            proc.terminate()
            proc.wait(10)
    stderr = "".join(proc.stderr.read() for proc in started if proc.stderr)
    assert "token authentication on" in stderr
    _assert_no_secret(stderr, security)


def test_followers_of_a_tls_cluster_copy_over_grpcs_tls_and_open_no_plaintext_stream(security: Security, tmp_path: Path) -> None:
    settings = {key: str(value) for key, value in security.server_config(tmp_path).items() if key.startswith("security.")}
    client = {key: str(value) for key, value in security.client_config("all").items()}
    with ReplicaCluster(tmp_path, servers=(1, 2), tablet_settings=settings, coordinator_settings=settings, client_settings=client) as cluster:
        with cluster.connect() as conn:
            table = create_table(conn, buckets=2, properties={"table.replication.factor": "2"})
            produce_orders(table, 0, 1000)
            wait_until(lambda: all(len(info.isr) == 2 for info in conn.admin.describe_buckets(table.path).values()), "both copies in sync")
            scanner = table.new_scan().create_log_scanner()
            scanner.subscribe_from_beginning()
            assert scan_all(scanner, 1000).num_rows == 1000
        wait_until(lambda: cluster.log_bytes(1) == cluster.log_bytes(2) > 0, "both servers hold the same bytes")
        for server_id in (1, 2):
            log = cluster.tablets[server_id].log_path.read_text()
            assert "no replica stream (TLS is on): followers fetch over gRPC" in log
            assert "replica stream listening" not in log


# ---------------------------------------------------------------- tiers


def test_tiering_and_reads_of_every_tier_with_tls_and_auth(
    spark: Any, server_factory: Callable[..., ServerProcess], security: Security, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    properties = {**LAKE_TABLE, "table.log.tiered.local-segments": "1", "table.log.ttl": "1h"}
    server = server_factory(**security.server_config(tmp_path / "data", **REMOTE_TIER))
    assert server.tablet is not None
    with lakelog.connect(server.address, security.client_config("all")) as conn:
        table = create_table(conn, buckets=2, properties=properties)
        produce_orders(table, 0, 60_000)
        wait_for_remote(conn, table.path)

        # The remote tier: the reader gets segment locations from the server and reads them itself.
        with lakelog.connect(server.address, security.client_config("reader", **{"client.lake.enabled": "false"})) as reader:
            with reader.get_table(table.path).new_scan().create_log_scanner() as scanner:
                scanner.subscribe_from_beginning()
                assert sorted(scan_all(scanner, 60_000).column("id").to_pylist()) == list(range(60_000))
                assert sum(scanner.remote_read_stats().values()) > 0

        # A job whose token may read but not tier cannot commit to the coordinator (what it writes to
        # Iceberg is up to the catalog's own credentials; the next job sends that snapshot again).
        with caplog.at_level(logging.INFO):
            with TieringJob(TieringOptions(server.address, client_config=security.client_config("all-but-tier")), spark=spark) as job:
                job.run_round()
        assert "token 'all-but-tier' may not call /lakelog.rpc.CoordinatorService/CommitLakeTableSnapshot" in caplog.text
        _assert_no_secret(caplog.text, security)
        assert _probe(lambda: conn.admin.get_lake_snapshot(table.path)) == "LakeSnapshotNotExistError"

        # The right token: the round commits (or, as after any lost commit, sends the Iceberg snapshot again).
        with TieringJob(TieringOptions(server.address, client_config=security.client_config("tiering")), spark=spark) as job:
            assert not job.run_round().failed
        buckets = conn.admin.describe_buckets(table.path)
        assert {b: i.lake_log_end_offset for b, i in buckets.items()} == {b: i.high_watermark for b, i in buckets.items()}
        assert expire_remote(server.tablet.remote, days=2).expired > 0
        for info in conn.admin.describe_buckets(table.path).values():  # offset 0 is in the lake only
            assert min(o for o in (info.remote_log_start_offset, info.local_log_start_offset) if o >= 0) > 0

    # The lake tier: offset 0 is now only in Iceberg, which the reader reads itself.
    config = security.client_config("reader", **{"client.lake.source": "iceberg-arrow"})
    with lakelog.connect(server.address, config) as reader:
        with reader.get_table(table.path).new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            assert sorted(scan_all(scanner, 60_000).column("id").to_pylist()) == list(range(60_000))


def test_a_server_refuses_an_expired_certificate_and_warns_before_expiry(
    server_factory: Callable[..., ServerProcess], security: Security, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    expired = security.ca.issue("expired", valid_days=-2)
    with pytest.raises(InvalidConfigError, match=rf"the certificate in {expired.cert_file} expired on .* renew it"):
        server_factory(
            tmp_path / "expired",
            **security.server_config(
                tmp_path / "expired", **{"security.tls.cert-file": str(expired.cert_file), "security.tls.key-file": str(expired.key_file)}
            ),
        )
    assert not (tmp_path / "expired" / "coordinator").exists(), "nothing is opened for a server that cannot serve"

    soon = security.ca.issue("soon", valid_days=5)
    with caplog.at_level(logging.WARNING, logger="lakelog.security.tls"):
        server = server_factory(
            tmp_path / "soon",
            **security.server_config(tmp_path / "soon", **{"security.tls.cert-file": str(soon.cert_file), "security.tls.key-file": str(soon.key_file)}),
        )
    assert f"the certificate in {soon.cert_file} expires on" in caplog.text and "in 4 day(s)" in caplog.text
    with lakelog.connect(server.address, security.client_config()) as conn:
        assert conn.admin.list_databases() == []


def test_tls_failures_say_what_is_wrong(server_factory: Callable[..., ServerProcess], security: Security, tmp_path: Path) -> None:
    def refusal(server: ServerProcess, config: dict[str, Any]) -> LakelogError:
        with lakelog.connect(server.address, {"client.request-timeout": "2s", **config}) as conn:
            with pytest.raises(LakelogError) as refused:
                conn.admin.list_databases()
        return refused.value

    started: list[ServerProcess] = []

    def tls_server(name: str, cert: ServerCertificate) -> ServerProcess:
        """A coordinator alone: an embedded tablet server could not register with a certificate
        that does not name its address, or has expired."""
        files = {"security.tls.cert-file": str(cert.cert_file), "security.tls.key-file": str(cert.key_file)}
        started.append(ServerProcess(security.server_config(tmp_path / name, **files), ("coordinator",)).start())
        return started[-1]

    server = tls_server("ok", security.cert)
    error = refusal(server, {})
    assert isinstance(error, lakelog.ServerUnreachableError) and "if it uses TLS, set security.tls.enabled=true" in str(error)
    error = refusal(server, security.client_config(ca_file=security.other_ca.ca_file))
    assert isinstance(error, TlsError) and "not signed by the CA of security.tls.ca-file" in str(error)

    plaintext = server_factory(tmp_path / "plain")
    error = refusal(plaintext, security.client_config())
    assert isinstance(error, TlsError) and "it does not speak TLS (a plaintext server)" in str(error)

    elsewhere = tls_server("elsewhere", security.ca.issue("elsewhere", (x509.DNSName("elsewhere.example"),)))
    error = refusal(elsewhere, security.client_config())
    assert isinstance(error, TlsError) and "its certificate does not name the address dialled" in str(error)

    valid_s = 3  # valid when the server starts, expired when the client dials
    expiring = tls_server("expiring", security.ca.issue("expiring", valid_days=valid_s / 86_400))
    time.sleep(valid_s + 1)
    error = refusal(expiring, security.client_config())
    assert isinstance(error, TlsError) and "its certificate has expired: the server needs a renewed one" in str(error)
    for process in started:
        process.stop(0)
