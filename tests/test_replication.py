"""Replicated buckets on a real cluster: a coordinator and three tablet servers, each its own
process (tests/harness/replica_cluster.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterator

import pytest

import lakelog
from tests.conftest import create_table
from tests.harness.replica_cluster import ReplicaCluster

FACTOR_3 = {"table.replication.factor": "3"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ReplicaCluster]:
    cluster = ReplicaCluster(tmp_path).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_factor_3_places_copies_on_three_servers_with_leaders_spread_and_describe_shows_them(cluster: ReplicaCluster) -> None:
    with cluster.connect() as conn:
        table = create_table(conn, buckets=6, properties=FACTOR_3)
        described = conn.admin.describe_buckets(table.path)
        assert all(sorted(info.replicas) == [1, 2, 3] for info in described.values())
        assert all(info.leader == info.replicas[0] and info.leader in info.isr for info in described.values())
        assert Counter(info.leader for info in described.values()) == {1: 2, 2: 2, 3: 2}
        plain = create_table(conn, name="plain", buckets=3)
        assert {b: (info.replicas, info.isr) for b, info in conn.admin.describe_buckets(plain.path).items()} == {
            b: ((info.leader,), (info.leader,)) for b, info in conn.admin.describe_buckets(plain.path).items()
        }


def test_a_factor_above_the_live_servers_is_refused(cluster: ReplicaCluster) -> None:
    with cluster.connect() as conn:
        with pytest.raises(lakelog.InvalidReplicationFactorError, match="replication factor 4 needs 4 live tablet servers, 3 are live"):
            create_table(conn, properties={"table.replication.factor": "4"})
        with pytest.raises(lakelog.InvalidTableError, match="table.replication.factor='0'"):
            create_table(conn, properties={"table.replication.factor": "0"})
        assert conn.admin.list_tables("shop") == []
