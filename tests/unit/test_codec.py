"""The rpc edge's codec (lakelog/rpc/codec.py): every dataclass that crosses the wire comes back
equal after a trip through its protobuf message and its bytes, what a field's absence means is
kept (a bucket its leader alone keeps, a table without partitions, no remote or lake answer), and
a malformed column change is refused naming the request."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakelog.errors import InvalidRequestError
from lakelog.lake_config import LakeConfig
from lakelog.metadata import BucketInfo, LakeBucketOffset, LakeSnapshot, PartitionInfo, TableChange, TableInfo, TablePath
from lakelog.cluster_state import BucketReplicas, LakeOffsets, ServerNode, TableAssignment
from lakelog.record.schema_bytes import schema_to_bytes
from lakelog.fetch_info import LakeLogFetchInfo, RemoteLogFetchInfo, RemoteLogSegment
from lakelog.rpc import codec
from lakelog.rpc import lakelog_api_pb2 as pb

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("tags", pa.list_(pa.string()))])
INFO = TableInfo(
    table_id=12,
    path=TablePath("shop", "orders"),
    schema=SCHEMA,
    schema_id=3,
    buckets=4,
    properties={"table.log.ttl": "7d", "table.datalake.enabled": "true"},
    comment="every order",
    created_ms=1_700_000_000_123,
    bucket_keys=("id",),
    partition_keys=("dt",),
)


def through_the_wire(message: Any) -> Any:
    """``message`` as the peer parses it from its bytes."""
    return type(message).FromString(message.SerializeToString())


def test_a_table_path_and_properties_come_back_equal() -> None:
    path = TablePath("shop", "orders-2024")
    assert codec.path_from_pb(through_the_wire(codec.path_to_pb(path))) == path
    properties = {"b": "2", "a": "1", "empty": ""}
    message = pb.PbTableInfo(properties=codec.properties_to_pb(properties))
    assert codec.properties_from_pb(list(through_the_wire(message).properties)) == properties


def test_properties_go_out_sorted_so_equal_maps_make_equal_bytes() -> None:
    assert [kv.key for kv in codec.properties_to_pb({"z": "1", "a": "2", "m": "3"})] == ["a", "m", "z"]


def test_a_table_info_comes_back_equal_with_its_schema_keys_and_properties() -> None:
    back = codec.table_info_from_pb(through_the_wire(codec.table_info_to_pb(INFO)))
    assert back == INFO
    assert back.schema.equals(SCHEMA)


def test_a_partition_s_info_keeps_its_id_and_name_and_a_table_s_has_none() -> None:
    partition = INFO.for_partition(PartitionInfo(40, "2024-05-01"))
    back = codec.table_info_from_pb(through_the_wire(codec.table_info_to_pb(partition)))
    assert (back.partition_id, back.partition_name, back.physical_id, back.label) == (40, "2024-05-01", 40, "shop.orders partition 2024-05-01")
    assert codec.table_info_from_pb(codec.table_info_to_pb(INFO)).partition_id is None


@pytest.mark.parametrize(
    "change",
    [
        TableChange.add_column("note", pa.string(), "free text"),
        TableChange.add_column("nested", pa.struct([("a", pa.int32()), ("b", pa.list_(pa.float64()))])),
        TableChange.widen_column("id", pa.int64()),
    ],
    ids=["add", "add nested", "widen"],
)
def test_a_table_change_comes_back_equal(change: TableChange) -> None:
    assert codec.table_change_from_pb(through_the_wire(codec.table_change_to_pb(change)), "AlterTable") == change


def test_a_column_change_holding_other_than_one_field_is_refused_naming_the_request() -> None:
    two = pb.PbTableChange(kind="add_column", column_name="x", column_type=schema_to_bytes(pa.schema([("a", pa.int8()), ("b", pa.int8())])))
    with pytest.raises(InvalidRequestError, match="AlterTable shop.orders: column_type holds 2 fields, not 1"):
        codec.table_change_from_pb(two, "AlterTable shop.orders")


def test_a_partition_spec_and_info_come_back_equal() -> None:
    spec = {"dt": "2024-05-01", "region": "eu"}
    assert codec.partition_spec_from_pb(through_the_wire(codec.partition_spec_to_pb(spec))) == spec
    for info in (PartitionInfo(7, "2024-05-01"), PartitionInfo(8, "2024-04-30", lake_only=True)):
        assert codec.partition_info_from_pb(through_the_wire(codec.partition_info_to_pb(info))) == info


def test_a_server_node_comes_back_equal() -> None:
    node = ServerNode(3, "tablet-3.internal", 9124)
    assert codec.node_from_pb(through_the_wire(codec.node_to_pb(node))) == node


def test_an_assignment_keeps_which_buckets_are_replicated_and_their_epochs() -> None:
    replicas = {1: BucketReplicas((2, 3, 1), (2, 1), leader_epoch=4, isr_version=9)}
    assignment = TableAssignment(INFO, {0: 1, 1: 2, 2: 3}, replicas)
    back = codec.table_metadata_from_pb(through_the_wire(codec.table_metadata_to_pb(assignment)))
    assert back.leaders == {0: 1, 1: 2, 2: 3}
    assert back.replicas == replicas, "buckets 0 and 2 are kept by their leader alone"
    assert back.info == INFO


def test_a_lake_snapshot_of_a_table_and_of_partitions_comes_back_equal_in_bucket_order() -> None:
    plain = LakeSnapshot(5, {1: LakeBucketOffset(0, 10, 99), 0: LakeBucketOffset(3, 8)})
    partitioned = LakeSnapshot(6, {(41, 0): LakeBucketOffset(0, 4, 1), (40, 1): LakeBucketOffset(2, 9, 2), (40, 0): LakeBucketOffset(0, 1)})
    for snapshot in (plain, partitioned):
        buckets = [through_the_wire(b) for b in codec.lake_buckets_to_pb(snapshot)]
        assert codec.lake_snapshot_from_pb(snapshot.snapshot_id, buckets) == snapshot
    order = [(b.partition_id, b.bucket_id) for b in codec.lake_buckets_to_pb(partitioned)]
    assert order == [(40, 0), (40, 1), (41, 0)]


def test_lake_offsets_notified_to_a_server_group_back_per_table_partition_and_snapshot() -> None:
    tables = [
        LakeOffsets(12, LakeSnapshot(5, {0: LakeBucketOffset(0, 10), 2: LakeBucketOffset(0, 30, 7)})),
        LakeOffsets(12, LakeSnapshot(5, {1: LakeBucketOffset(4, 20)}), partition_id=40),
        LakeOffsets(13, LakeSnapshot(2, {0: LakeBucketOffset(0, 1)})),
    ]
    back = codec.lake_offsets_from_pb(through_the_wire(codec.lake_offsets_to_pb(tables)))
    assert sorted(back, key=lambda t: (t.table_id, t.partition_id or 0)) == tables
    assert [t.physical_id for t in back] == [12, 40, 13]


def test_a_lake_config_comes_back_equal_and_an_old_server_s_missing_catalog_name_gets_the_default() -> None:
    config = LakeConfig("iceberg", {"type": "sql", "uri": "sqlite:////tmp/c.db"}, "sc://spark:15002", {"s3.region": "eu"}, "host-a", "lake")
    assert codec.lake_config_from_pb(through_the_wire(codec.lake_config_to_pb(config))) == config
    message = codec.lake_config_to_pb(config)
    message.ClearField("catalog_name")
    assert codec.lake_config_from_pb(message).catalog_name == LakeConfig().catalog_name


def test_a_bucket_description_comes_back_equal() -> None:
    info = BucketInfo(2, 500, 100, 0, 100, 0, 50, remote_error="manifest gone", replicas=(2, 1), isr=(2,), leader_epoch=3)
    message = through_the_wire(codec.bucket_info_to_pb(4, info, local_segments=3, remote_segments=7))
    assert (message.bucket_id, message.local_segment_count, message.remote_segment_count) == (4, 3, 7)
    assert codec.bucket_info_from_pb(message) == info


def _fetch_answer(**fields: Any) -> pb.PbFetchLogRespForBucket:
    return through_the_wire(pb.PbFetchLogRespForBucket(bucket_id=0, **fields))


def test_a_remote_answer_comes_back_equal_and_its_absence_is_none() -> None:
    segments = (RemoteLogSegment("seg-a", 0, 100, 1_700_000_000_000, 4096), RemoteLogSegment("seg-b", 100, 250, 1_700_000_000_500, 8192))
    info = RemoteLogFetchInfo("file:///remote/log/shop/orders-12/0", segments, 640, "2024-05-01")
    assert codec.remote_fetch_info_from_pb(_fetch_answer(remote_log_fetch_info=codec.remote_fetch_info_to_pb(info))) == info
    assert codec.remote_fetch_info_to_pb(None) is None
    assert codec.remote_fetch_info_from_pb(_fetch_answer()) is None


def test_a_remote_answer_naming_no_segment_is_no_remote_answer() -> None:
    empty = pb.PbRemoteLogFetchInfo(remote_log_tablet_dir="file:///remote/x", first_start_pos=0)
    assert codec.remote_fetch_info_from_pb(_fetch_answer(remote_log_fetch_info=empty)) is None


def test_a_lake_answer_comes_back_equal_and_its_absence_is_none() -> None:
    info = LakeLogFetchInfo(snapshot_id=77, log_end_offset=12_345)
    assert codec.lake_fetch_info_from_pb(_fetch_answer(lake_log_fetch_info=codec.lake_fetch_info_to_pb(info))) == info
    assert codec.lake_fetch_info_to_pb(None) is None
    assert codec.lake_fetch_info_from_pb(_fetch_answer()) is None
