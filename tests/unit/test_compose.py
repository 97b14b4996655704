"""docker-compose.yml, checked without a Docker engine: it parses, has the services the README
promises, and everything of lakelog it names exists. Every ``lakelog`` command goes through the
CLI's real argument parser and its config files and ``--set`` keys through ``Configuration.load``,
exactly as the container would run them; mounted files, Dockerfile sources and extras exist; every
address points at a service; every ``${VAR}`` has a default. Every service's image is a target of
the Dockerfile that runs as a user of its own with a HEALTHCHECK, servers without PySpark; every
metric the Grafana dashboard queries is one the servers or the tiering job export.
"""

from __future__ import annotations

import argparse
import json
import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from lakelog.cli.main import build_parser
from lakelog.config import Configuration

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
EXPECTED_SERVICES = {
    "minio", "minio-buckets", "iceberg-rest", "coordinator", "tablet-server-1", "tablet-server-2", "tablet-server-3", "tiering", "prometheus",
    "spark-connect", "grafana", "client",
}
SERVERS = {"coordinator", "tablet-server-1", "tablet-server-2", "tablet-server-3"}
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "lakelog.json"
# Where metric families are defined: every "lakelog_..." string literal there is one.
METRIC_SOURCES = [*(ROOT / "server").rglob("*.py"), *(ROOT / "tiering").rglob("*.py")]
# What prometheus_client appends to a family's name in the samples it exports.
SAMPLE_SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_info", "_created")
# Keys whose values are addresses other containers must resolve: each host must be a service.
ADDRESS_KEYS = ("coordinator.address", "remote.fs.s3.endpoint", "datalake.iceberg.uri", "datalake.iceberg.s3.endpoint", "lake.spark.master")
# ${VAR}, ${VAR:-default}, ${VAR-default}; $$ escapes a dollar for the container's own shell.
INTERPOLATION = re.compile(r"(?<!\$)\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<default>:?-[^}]*)?\}")
ESCAPED_VARIABLE = re.compile(r"\$\$\{?(?P<name>[A-Za-z_][A-Za-z0-9_]*)")


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(compose, dict) and isinstance(compose.get("services"), dict)
    return compose["services"]


def _lakelog_services(services: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Per service that runs lakelog, its command as an argv list."""
    found = {}
    for name, service in services.items():
        command = service.get("command")
        if isinstance(command, str):
            command = command.split()
        if command and command[0] == "lakelog":
            found[name] = [str(part) for part in command]
    return found


def _parse(argv: list[str]) -> argparse.Namespace:
    """``argv`` through the CLI's own parser; an unknown command, flag or bad value fails the test."""
    try:
        return build_parser().parse_args(argv[1:])
    except SystemExit:
        pytest.fail(f"`{' '.join(argv)}` is not a valid lakelog command line (argparse says why above)")


def _bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> repository file, for every ``./host:/container[:mode]`` volume."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith((".", "/")):
            mounts[target] = (ROOT / source).resolve()
    return mounts


def _configuration(service: dict[str, Any], args: argparse.Namespace) -> Configuration:
    """What the container's lakelog loads: its --config file (from the repository, through the
    service's mount), then its --set keys."""
    config = getattr(args, "config", None)
    file = None
    if config:
        mounts = _bind_mounts(service)
        assert config in mounts, f"--config {config} is not a file the service mounts"
        file = mounts[config]
    return Configuration.load(file, getattr(args, "set", []))


def test_the_compose_file_has_every_service(services: dict[str, dict[str, Any]]) -> None:
    assert EXPECTED_SERVICES <= set(services)
    for name, service in services.items():
        assert "image" in service or "build" in service, name
        for needed in service.get("depends_on", []):
            assert needed in services, f"{name} depends on unknown service {needed}"


def test_every_lakelog_command_parses_with_the_real_cli(services: dict[str, dict[str, Any]]) -> None:
    commands = _lakelog_services(services)
    assert set(commands) == {"coordinator", "tablet-server-1", "tablet-server-2", "tablet-server-3", "spark-connect", "tiering", "client"}
    parsed = {name: _parse(argv) for name, argv in commands.items()}
    assert parsed["coordinator"].command == "coordinator"
    assert {parsed[f"tablet-server-{i}"].server_id for i in (1, 2)} == {1, 2}
    assert parsed["tiering"].command == "tier" and not parsed["tiering"].once, "the tiering job keeps going"


def test_every_config_key_loads(services: dict[str, dict[str, Any]]) -> None:
    for name, argv in _lakelog_services(services).items():
        args = _parse(argv)
        if name not in SERVERS | {"tiering"}:
            continue  # spark-connect: Spark settings (--conf); client: LAKELOG_BOOTSTRAP only
        conf = _configuration(services[name], args)  # raises InvalidConfigError on an unknown key or bad value
        assert conf.items(), f"{name} configures nothing"
    coordinator = _configuration(services["coordinator"], _parse(_lakelog_services(services)["coordinator"]))
    assert coordinator.get("datalake.iceberg.type") == "rest"
    tablet = _configuration(services["tablet-server-1"], _parse(_lakelog_services(services)["tablet-server-1"]))
    assert tablet.get("remote.data.dir").startswith("s3://")


def test_the_coordinator_advertises_the_spark_connect_service(services: dict[str, dict[str, Any]]) -> None:
    commands = _lakelog_services(services)
    connect = _parse(commands["spark-connect"])
    assert connect.command == "spark-connect" and connect.host == "0.0.0.0", "reachable from the other containers"
    coordinator = _configuration(services["coordinator"], _parse(commands["coordinator"]))
    assert coordinator.get("lake.spark.master") == f"sc://spark-connect:{connect.port}"
    assert _parse(commands["tiering"]).spark_master is None, "the tiering job uses the Spark the coordinator advertises"


def test_every_address_names_a_service_and_every_bucket_is_created(services: dict[str, dict[str, Any]]) -> None:
    buckets_command = " ".join(services["minio-buckets"]["command"])
    for name, argv in _lakelog_services(services).items():
        args = _parse(argv)
        conf = _configuration(services[name], args)
        addresses = [conf.get(key) for key in ADDRESS_KEYS if conf.items().get(key)]
        addresses += [value for value in (getattr(args, "bootstrap", None), getattr(args, "coordinator", None)) if value]
        for address in addresses:
            host = urlsplit(address if "://" in address else f"//{address}").hostname
            assert host in services, f"{name}: {address} is not the address of a service"
        remote = conf.items().get("remote.data.dir", "")
        if remote.startswith("s3://"):
            assert f"local/{urlsplit(remote).netloc}" in buckets_command, f"{name}: bucket of {remote} is never created"
    warehouse = services["iceberg-rest"]["environment"]["CATALOG_WAREHOUSE"]
    assert f"local/{urlsplit(warehouse).netloc}" in buckets_command


def test_every_mounted_file_exists(services: dict[str, dict[str, Any]]) -> None:
    mounted = [path for service in services.values() for path in _bind_mounts(service).values()]
    assert mounted
    for path in mounted:
        assert path.is_file(), f"{path} is mounted but does not exist"
        assert path.is_relative_to(ROOT)


def test_every_variable_has_a_default() -> None:
    text = COMPOSE_FILE.read_text()
    used = list(INTERPOLATION.finditer(text))
    assert used
    for match in used:
        assert match.group("default"), f"${{{match.group('name')}}} has no default, and the repository ships no .env"


def test_shell_variables_are_in_the_service_environment(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        for part in service.get("command", []) if isinstance(service.get("command"), list) else []:
            for match in ESCAPED_VARIABLE.finditer(str(part)):
                assert match.group("name") in service.get("environment", {}), f"{name} uses ${match.group('name')} but does not set it"


def test_the_dockerfile_installs_what_exists() -> None:
    text = DOCKERFILE.read_text()
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    installs = re.findall(r"pip install [^\n]*?\"?\.\[(?P<extras>[^\]]+)\]", text)
    assert installs, "the Dockerfile installs lakelog with its extras"
    for group in installs:
        for extra in group.split(","):
            assert extra.strip() in extras, f"pyproject.toml has no extra {extra!r}"
    for line in text.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), f"the Dockerfile copies {source}, which does not exist"
    packaged = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values()
    copied = {part for line in text.splitlines() if line.startswith("COPY ") for part in line.split()[1:-1]}
    assert set(packaged) <= copied, "every package folder is in the image"


def test_services_wait_for_healthy_servers(services: dict[str, dict[str, Any]]) -> None:
    """No bare depends_on: a service starts once what it needs answers, not merely once it started."""
    for name, service in services.items():
        needs = service.get("depends_on", {})
        assert isinstance(needs, dict), f"{name}: depends_on without a condition"
        for needed, rule in needs.items():
            assert rule.get("condition") in ("service_healthy", "service_completed_successfully"), f"{name} -> {needed}"
            if rule["condition"] == "service_healthy":
                assert not services[needed].get("healthcheck", {}).get("disable"), f"{name} waits for {needed}, which has no healthcheck"


def test_every_server_is_probed_with_lakelog_health(services: dict[str, dict[str, Any]]) -> None:
    for name in SERVERS:
        test = services[name]["healthcheck"]["test"]
        assert test[0] == "CMD", name
        args = _parse(test[1:])
        assert args.command == "health", name
        port = _configuration(services[name], _parse(_lakelog_services(services)[name])).get("server.port")
        assert args.bootstrap == f"127.0.0.1:{port}", f"{name} probes the port its server listens on"
    tiering = _parse(_lakelog_services(services)["tiering"])
    probe = " ".join(services["tiering"]["healthcheck"]["test"])
    assert f"http://127.0.0.1:{tiering.metrics_port}/metrics" in probe, "the tiering job is healthy while it serves its metrics"


def test_prometheus_scrapes_every_server(services: dict[str, dict[str, Any]]) -> None:
    config_file = _bind_mounts(services["prometheus"])["/etc/prometheus/prometheus.yml"]
    targets = {target for job in yaml.safe_load(config_file.read_text())["scrape_configs"] for group in job["static_configs"] for target in group["targets"]}
    expected = set()
    for name in SERVERS:
        metrics_port = _configuration(services[name], _parse(_lakelog_services(services)[name])).get("metrics.port")
        expected.add(f"{name}:{metrics_port}")
    expected.add(f"tiering:{_parse(_lakelog_services(services)['tiering']).metrics_port}")
    assert targets == expected


def _dockerfile_stages() -> dict[str, list[str]]:
    """Per ``FROM ... AS name`` stage, its instructions (continuation lines joined), its parent's first."""
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    for line in DOCKERFILE.read_text().replace("\\\n", " ").splitlines():
        line = line.strip()
        if line.startswith("FROM "):
            parts = line.split()
            assert len(parts) == 4 and parts[2].upper() == "AS", f"every stage is named: {line}"
            current = list(stages.get(parts[1], [])) + [line]
            stages[parts[3]] = current
        elif line and not line.startswith("#"):
            current.append(line)
    return stages


def test_every_image_is_a_dockerfile_target_that_is_not_root_and_probes_itself(services: dict[str, dict[str, Any]]) -> None:
    stages = _dockerfile_stages()
    targets = {}
    for name, service in services.items():
        if "build" in service:
            build = service["build"]
            assert isinstance(build, dict) and build.get("target") in stages, f"{name} builds a target of the Dockerfile"
            targets[name] = build["target"]
    assert {targets[name] for name in SERVERS} == {"coordinator", "tablet-server"}
    assert targets["tiering"] == targets["spark-connect"] == "tiering" and targets["client"] == "client"
    for target in {"client", "coordinator", "tablet-server", "tiering"}:
        lines = stages[target]
        users = [line.split()[1] for line in lines if line.startswith("USER ")]
        assert users and users[-1] == "lakelog", f"{target} runs as user lakelog, not root"
        assert any(line.startswith("HEALTHCHECK ") for line in lines), f"{target} has a HEALTHCHECK"
        extras = {extra for line in lines for group in re.findall(r"\.\[([^\]]+)\]", line) for extra in group.split(",")}
        java = any("jre" in line for line in lines)
        if target == "tiering":
            assert "spark" in extras and java
        else:
            assert not extras & {"spark", "all"} and not java, f"{target} installs no PySpark and no JVM"


def _exported_metrics() -> set[str]:
    names = set()
    for source in METRIC_SOURCES:
        names.update(re.findall(r'"(lakelog_[a-z_]+)"', source.read_text()))
    return names


def test_the_dashboard_queries_only_metrics_the_code_exports(services: dict[str, dict[str, Any]]) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exported = _exported_metrics()
    assert {"lakelog_tablet_server_up", "lakelog_tiering_rounds", "lakelog_tiering_lake_lag_seconds"} <= exported
    queried = set()
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "prometheus", panel["title"]
            queried.update(re.findall(r"\blakelog_[a-z_]+", target["expr"]))
    for name in queried:
        family = next((name[: -len(s)] for s in SAMPLE_SUFFIXES if name.endswith(s) and name[: -len(s)] in exported), name)
        assert family in exported, f"the dashboard queries {name}, which no server or tiering job exports"
    wanted = {
        "lakelog_produce_records_total", "lakelog_fetch_answers_total", "lakelog_lake_lag_records", "lakelog_tiering_lake_lag_seconds",
        "lakelog_tablet_server_up", "lakelog_tiering_rounds_total", "lakelog_tiering_round_duration_seconds_bucket",
    }
    assert wanted <= queried, f"not on the dashboard: {wanted - queried}"
    datasource = yaml.safe_load(_bind_mounts(services["grafana"])["/etc/grafana/provisioning/datasources/prometheus.yml"].read_text())
    assert datasource["datasources"][0]["uid"] == "prometheus"
    assert urlsplit(datasource["datasources"][0]["url"]).hostname == "prometheus"
    provider = yaml.safe_load(_bind_mounts(services["grafana"])["/etc/grafana/provisioning/dashboards/lakelog.yml"].read_text())
    assert _bind_mounts(services["grafana"])[f"{provider['providers'][0]['options']['path']}/lakelog.json"] == DASHBOARD


def test_the_servers_share_a_cluster_secret(services: dict[str, dict[str, Any]]) -> None:
    secrets = {
        name: _configuration(services[name], _parse(argv)).get("cluster.secret")
        for name, argv in _lakelog_services(services).items() if name in SERVERS
    }
    assert len(set(secrets.values())) == 1 and next(iter(secrets.values())), "one cluster.secret, set on every server"
