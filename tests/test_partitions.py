"""Partitioned tables on real servers: partitions as coordinator metadata, writes and scans per
partition, dropping a partition."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Callable

import pyarrow as pa
import pytest

import lakelog
from lakelog.client.rpc.coordinator_gateway import CoordinatorGateway
from lakelog.rpc.rpc_edge import RpcEdge
from lakelog.server.server_process import ServerProcess

EVENTS = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("amount", pa.float64())])
PATH = lakelog.TablePath("shop", "events")


def _partitioned(conn: lakelog.Connection, buckets: int = 2, properties: dict[str, str] | None = None) -> lakelog.Table:
    conn.admin.create_database("shop", ignore_if_exists=True)
    conn.admin.create_table(PATH, lakelog.TableDescriptor(EVENTS, buckets, properties or {}, partition_keys=["dt"]))
    return conn.get_table(PATH)


def test_partitions_are_created_listed_and_dropped_and_ids_never_come_back(
    server_factory: Callable[..., ServerProcess], tmp_path
) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        _partitioned(conn)
        first = conn.admin.create_partition(PATH, {"dt": "2026-11-23"})
        second = conn.admin.create_partition(PATH, {"dt": "2026-11-24"})
        assert conn.admin.list_partition_infos(PATH) == [
            lakelog.PartitionInfo(first, "2026-11-23"),
            lakelog.PartitionInfo(second, "2026-11-24"),
        ]
        with pytest.raises(lakelog.PartitionAlreadyExistsError, match="2026-11-23"):
            conn.admin.create_partition(PATH, {"dt": "2026-11-23"})
        assert conn.admin.create_partition(PATH, {"dt": "2026-11-23"}, ignore_if_exists=True) == first
        conn.admin.drop_partition(PATH, {"dt": "2026-11-23"})
        with pytest.raises(lakelog.PartitionNotExistError, match="2026-11-23"):
            conn.admin.drop_partition(PATH, {"dt": "2026-11-23"})
        conn.admin.drop_partition(PATH, {"dt": "2026-11-23"}, ignore_if_not_exists=True)
        again = conn.admin.create_partition(PATH, {"dt": "2026-11-23"})
        assert again not in (first, second)
    server.stop(0)
    server = server_factory(tmp_path / "data")
    with lakelog.connect(server.address) as conn:
        assert conn.admin.list_partition_infos(PATH) == [
            lakelog.PartitionInfo(second, "2026-11-24"),
            lakelog.PartitionInfo(again, "2026-11-23"),
        ]
        conn.admin.drop_partition(PATH, {"dt": "2026-11-23"})
        assert conn.admin.create_partition(PATH, {"dt": "2026-11-25"}) > again


@pytest.mark.parametrize(
    "spec, match",
    [
        ({"dt": "a/b"}, "a/b"),
        ({"dt": ".."}, r"'\.\.'"),
        ({"dt": "x..y"}, "x..y"),
        ({"dt": ""}, "''"),
        ({"dt": 20261123}, "int"),
        ({"dt": "a$b"}, r"a\$b"),
        ({"day": "2026-11-23"}, "exactly the partition keys"),
        ({"dt": "2026-11-23", "id": "1"}, "exactly the partition keys"),
    ],
)
def test_bad_partition_values_are_refused_by_name(conn: lakelog.Connection, spec: dict, match: str) -> None:
    _partitioned(conn)
    with pytest.raises(lakelog.InvalidPartitionError, match=match):
        conn.admin.create_partition(PATH, spec)
    assert conn.admin.list_partition_infos(PATH) == []


def test_the_coordinator_checks_partition_values_itself(server: ServerProcess, conn: lakelog.Connection) -> None:
    """A client that skips the checks (here: the raw gateway) is refused by the coordinator too."""
    _partitioned(conn)
    with pytest.raises(lakelog.InvalidPartitionError, match=r"'\.\./x'"):
        CoordinatorGateway(RpcEdge(conn.config), [server.address]).create_partition(PATH, {"dt": "../x"}, False)
    assert conn.admin.list_partition_infos(PATH) == []


def test_too_many_partitions(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory(**{"max.partition.num": 3})
    with lakelog.connect(server.address) as conn:
        _partitioned(conn)
        for day in range(3):
            conn.admin.create_partition(PATH, {"dt": f"d{day}"})
        with pytest.raises(lakelog.TooManyPartitionsError, match="max.partition.num"):
            conn.admin.create_partition(PATH, {"dt": "d3"})
        conn.admin.drop_partition(PATH, {"dt": "d0"})
        conn.admin.create_partition(PATH, {"dt": "d3"})
        assert [p.partition_name for p in conn.admin.list_partition_infos(PATH)] == ["d1", "d2", "d3"]


def test_partition_keys_must_be_string_columns(conn: lakelog.Connection) -> None:
    conn.admin.create_database("shop", ignore_if_exists=True)
    with pytest.raises(lakelog.InvalidTableError, match="'id'.*string"):
        conn.admin.create_table(PATH, lakelog.TableDescriptor(EVENTS, 2, partition_keys=["id"]))
    with pytest.raises(lakelog.InvalidPartitionError, match="not partitioned"):
        conn.admin.create_table(lakelog.TablePath("shop", "plain"), lakelog.TableDescriptor(EVENTS, 2))
        conn.admin.create_partition(lakelog.TablePath("shop", "plain"), {"dt": "x"})


def _cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lakelog", *args, "--bootstrap", server.address], capture_output=True, text=True, timeout=120
    )


def test_partition_cli(server: ServerProcess) -> None:
    created = _cli(server, "table", "create", "shop.events", "--schema", "dt:string,id:int64", "--partition-key", "dt", "--buckets", "2")
    assert created.returncode == 0, created.stderr
    assert _cli(server, "partition", "create", "shop.events", "2026-11-23").returncode == 0
    assert _cli(server, "partition", "create", "shop.events", "--spec", "dt=2026-11-24").returncode == 0
    bad = _cli(server, "partition", "create", "shop.events", "../etc")
    assert bad.returncode != 0 and "../etc" in bad.stderr
    listed = _cli(server, "partition", "list", "shop.events", "--output", "json")
    assert [p["partition_name"] for p in json.loads(listed.stdout)] == ["2026-11-23", "2026-11-24"]
    assert _cli(server, "partition", "drop", "shop.events", "2026-11-23").returncode == 0
    text = _cli(server, "partition", "list", "shop.events").stdout
    assert "2026-11-24" in text and "2026-11-23" not in text
    described = _cli(server, "table", "describe", "shop.events", "--output", "json")
    assert json.loads(described.stdout)["partition_keys"] == ["dt"]
