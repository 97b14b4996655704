"""The coordinator's lake bookkeeping: lake snapshots committed, refused, persisted across a
restart, handed to a registering tablet server; and the lake configuration it hands out."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import grpc
import pytest

import lakelog
from lakelog.errors import InvalidRequestError, LakeSnapshotNotExistError, StaleLakeSnapshotError
from lakelog.lake_config import this_host
from lakelog.cluster_state import LakeOffsets
from lakelog.metadata import LakeBucketOffset, LakeSnapshot
from lakelog.rpc import codec
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceStub
from lakelog.server.server_process import ServerProcess
from tests.harness.lake_tier import LAKE_TABLE, lake_table
from tests.harness.membership import member_metadata
from tests.harness.tables import create_table

PATH = lakelog.TablePath("shop", "orders")


def _snapshot(snapshot_id: int, *ends: int) -> LakeSnapshot:
    return LakeSnapshot(snapshot_id, {b: LakeBucketOffset(0, end, 1_000 + end) for b, end in enumerate(ends)})


def test_commit_and_get_lake_snapshot(conn: lakelog.Connection) -> None:
    create_table(conn, buckets=2, properties=LAKE_TABLE)
    with pytest.raises(LakeSnapshotNotExistError, match="shop.orders has no lake snapshot yet"):
        conn.admin.get_lake_snapshot(PATH)

    conn.internal_admin.commit_lake_snapshot(PATH, _snapshot(11, 100, 50))
    assert conn.admin.get_lake_snapshot(PATH) == _snapshot(11, 100, 50)
    conn.internal_admin.commit_lake_snapshot(PATH, _snapshot(11, 100, 50))  # a job re-sending after a lost reply

    conn.internal_admin.commit_lake_snapshot(PATH, _snapshot(12, 100, 80))
    with pytest.raises(StaleLakeSnapshotError, match="bucket 1: lake snapshot 13 ends at offset 60, behind snapshot 12"):
        conn.internal_admin.commit_lake_snapshot(PATH, _snapshot(13, 200, 60))
    assert conn.admin.get_lake_snapshot(PATH) == _snapshot(12, 100, 80)

    # A snapshot naming one bucket keeps the other's range.
    conn.internal_admin.commit_lake_snapshot(PATH, LakeSnapshot(14, {0: LakeBucketOffset(0, 150, 9)}))
    assert conn.admin.get_lake_snapshot(PATH) == LakeSnapshot(14, {0: LakeBucketOffset(0, 150, 9), 1: LakeBucketOffset(0, 80, 1_080)})


def test_commit_refuses_bad_snapshots(conn: lakelog.Connection) -> None:
    create_table(conn, buckets=2, properties=LAKE_TABLE)
    create_table(conn, name="plain")
    with pytest.raises(InvalidRequestError, match="no bucket 2"):
        conn.internal_admin.commit_lake_snapshot(PATH, _snapshot(1, 10, 10, 10))
    with pytest.raises(InvalidRequestError, match="not a range"):
        conn.internal_admin.commit_lake_snapshot(PATH, LakeSnapshot(1, {0: LakeBucketOffset(5, 4)}))
    with pytest.raises(InvalidRequestError, match="shop.plain is not lake-enabled"):
        conn.internal_admin.commit_lake_snapshot(lakelog.TablePath("shop", "plain"), _snapshot(1, 10))


def test_lake_offsets_survive_a_restart_and_reach_a_registering_tablet_server(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    data = tmp_path / "cluster"
    server = server_factory(data)
    with lakelog.connect(server.address) as conn:
        create_table(conn, buckets=3, properties=LAKE_TABLE)
        conn.internal_admin.commit_lake_snapshot(PATH, _snapshot(7, 30, 0, 10))
    server.stop()

    server = server_factory(data)
    with lakelog.connect(server.address) as conn:
        assert conn.admin.get_lake_snapshot(PATH) == _snapshot(7, 30, 0, 10)
        table_id = conn.admin.get_table_info(PATH).table_id
        # The restarted tablet server learnt the lake ranges when it registered.
        lake_ranges = {b: (i.lake_log_start_offset, i.lake_log_end_offset) for b, i in conn.admin.describe_buckets(PATH).items()}
        assert lake_ranges == {0: (0, 30), 1: (-1, -1), 2: (0, 10)}
    with grpc.insecure_channel(server.address) as channel:
        node = pb.PbServerNode(node_id=0, host=server.host, port=server.port)  # the server's own registration again
        response = CoordinatorServiceStub(channel).RegisterTabletServer(
            pb.RegisterTabletServerRequest(server=node), metadata=member_metadata(server)
        )
    assert codec.lake_offsets_from_pb(response.lake_offsets) == [LakeOffsets(table_id, _snapshot(7, 30, 0, 10))]


def test_dropping_a_table_forgets_its_lake_snapshot(conn: lakelog.Connection) -> None:
    create_table(conn, properties=LAKE_TABLE)
    conn.internal_admin.commit_lake_snapshot(PATH, _snapshot(3, 5))
    conn.admin.drop_table(PATH)
    with pytest.raises(lakelog.TableNotExistError):
        conn.admin.get_lake_snapshot(PATH)


def test_lake_config_leaves_secrets_out(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory(
        **{
            "datalake.iceberg.type": "sql",
            "datalake.iceberg.uri": "postgresql+psycopg2://lake:hunter2@db.example:5432/iceberg",
            "datalake.iceberg.warehouse": "s3://lake/wh",
            "datalake.iceberg.s3.endpoint": "http://127.0.0.1:9000",
            "datalake.iceberg.s3.region": "eu-west-1",
            "datalake.iceberg.s3.access-key-id": "AKIA",
            "datalake.iceberg.s3.secret-access-key": "shh",
            "datalake.iceberg.token": "t0k3n",
            "datalake.iceberg.credential": "client:secret",
        }
    )
    with lakelog.connect(server.address) as conn:
        config = conn.admin.get_lake_config()
    assert config.format == "iceberg"
    assert dict(config.catalog_properties) == {
        "type": "sql",
        "uri": "postgresql+psycopg2://lake@db.example:5432/iceberg",
        "warehouse": "s3://lake/wh",
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.region": "eu-west-1",
    }
    machine_id = Path("/etc/machine-id").read_text().strip() if Path("/etc/machine-id").exists() else ""
    assert config.server_host == this_host() and (not machine_id or machine_id not in repr(config)), (
        "the machine id is confidential (machine-id(5)): only a keyed hash of it leaves the machine"
    )


def test_default_lake_is_a_sqlite_catalog_in_the_data_dir(server: ServerProcess, conn: lakelog.Connection) -> None:
    lake = server.data_dir / "lake"
    assert dict(conn.admin.get_lake_config().catalog_properties) == {
        "type": "sql",
        "uri": f"sqlite:///{lake / 'catalog.db'}",
        "warehouse": (lake / "warehouse").as_uri(),
    }
    table = create_table(conn, buckets=2, properties=LAKE_TABLE)
    assert table.info.properties["table.datalake.format"] == "iceberg"
    assert (lake / "catalog.db").exists()
    assert (lake / "warehouse" / "shop" / "orders" / "metadata").is_dir()

    iceberg = lake_table(server, PATH)
    assert [(f.name, str(f.field_type), f.required) for f in iceberg.schema().fields] == [
        ("id", "long", False),
        ("name", "string", False),
        ("amount", "double", False),
        ("__bucket", "int", True),
        ("__offset", "long", True),
        ("__timestamp", "timestamptz", True),
    ]
    (partition,) = iceberg.spec().fields
    assert (iceberg.schema().find_column_name(partition.source_id), str(partition.transform)) == ("__bucket", "identity")
    (sort,) = iceberg.sort_order().fields
    assert iceberg.schema().find_column_name(sort.source_id) == "__offset"
    assert iceberg.properties["commit.retry.num-retries"] == "0"


def test_commit_answers_each_table_on_its_own(server: ServerProcess, conn: lakelog.Connection) -> None:
    """One bad table in a CommitLakeTableSnapshot fails only itself."""
    create_table(conn, buckets=1, properties=LAKE_TABLE)
    table_id = conn.admin.get_table_info(PATH).table_id
    request = pb.CommitLakeTableSnapshotRequest(
        tables_req=[
            pb.PbLakeTableSnapshotInfo(table_id=table_id, snapshot_id=5, buckets_req=codec.lake_buckets_to_pb(_snapshot(5, 9))),
            pb.PbLakeTableSnapshotInfo(table_id=999, snapshot_id=5, buckets_req=codec.lake_buckets_to_pb(_snapshot(5, 9))),
        ]
    )
    with grpc.insecure_channel(server.address) as channel:
        response = CoordinatorServiceStub(channel).CommitLakeTableSnapshot(request)
    assert [r.error_code for r in response.table_resp] == [0, lakelog.TableNotExistError.code]
    assert conn.admin.get_lake_snapshot(PATH).snapshot_id == 5
