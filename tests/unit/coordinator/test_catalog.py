"""The coordinator's catalog built directly on a temporary SQLite store, its tablet servers and lake
small recording fakes: databases, tables, placement, schema versions, partitions and what each
tablet server is told; everything it stores survives a restart on the same directory."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakelog.errors import (
    DatabaseAlreadyExistError,
    DatabaseNotEmptyError,
    DatabaseNotExistError,
    InvalidNameError,
    InvalidPartitionError,
    InvalidTableError,
    LakeError,
    NetworkError,
    NoTabletServerError,
    PartitionAlreadyExistsError,
    PartitionNotExistError,
    PartitionNotInLakeError,
    SchemaNotExistError,
    StorageError,
    TableAlreadyExistError,
    TableNotExistError,
    TooManyBucketsError,
    TooManyPartitionsError,
)
from lakelog.metadata import DATALAKE_FORMAT, BucketInfo, LakeBucketOffset, LakeSnapshot, TableChange, TableDescriptor, TablePath
from lakelog.cluster_state import ServerNode
from lakelog.server.coordinator.coordinator import Coordinator
from lakelog.write_fence import fenced_leaders
from tests.harness.coordinator_seams import RecordingLake, RecordingTablets, coordinator_on

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
DAYS = pa.schema([("id", pa.int64()), ("dt", pa.string())])
ORDERS = TablePath("shop", "orders")
EVENTS = TablePath("shop", "events")
LAKE = {"table.datalake.enabled": "true"}


# ---------------------------------------------------------------- databases


def test_databases_are_created_listed_and_a_second_one_of_a_name_is_refused(coordinator: Coordinator) -> None:
    coordinator.create_database("audit", comment="who did what")
    assert sorted(coordinator.list_databases()) == ["audit", "shop"]
    with pytest.raises(DatabaseAlreadyExistError, match="'audit'"):
        coordinator.create_database("audit")
    coordinator.create_database("audit", ignore_if_exists=True)
    assert sorted(coordinator.list_databases()) == ["audit", "shop"]


@pytest.mark.parametrize("name", ["", "../etc", "a b", "x" * 129, "-leading-dash"])
def test_a_database_name_that_could_reach_a_path_is_refused_naming_it(coordinator: Coordinator, name: str) -> None:
    with pytest.raises(InvalidNameError, match="invalid database name"):
        coordinator.create_database(name)
    assert coordinator.list_databases() == ["shop"]


def test_a_database_with_tables_is_dropped_only_with_cascade_and_its_tables_are_dropped_on_the_servers(
    coordinator: Coordinator, tablets: RecordingTablets
) -> None:
    table_id = coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 3))
    with pytest.raises(DatabaseNotEmptyError, match="'shop' still has 1 table"):
        coordinator.drop_database("shop")
    coordinator.drop_database("shop", cascade=True)
    assert coordinator.list_databases() == []
    assert all(table_id in told.dropped for told in tablets.told[-3:])
    with pytest.raises(DatabaseNotExistError, match="'shop'"):
        coordinator.drop_database("shop")
    coordinator.drop_database("shop", ignore_if_not_exists=True)


def test_tables_of_a_missing_database_are_refused_naming_it(coordinator: Coordinator) -> None:
    with pytest.raises(DatabaseNotExistError, match="'nowhere'"):
        coordinator.create_table(TablePath("nowhere", "t"), TableDescriptor(SCHEMA))
    with pytest.raises(DatabaseNotExistError, match="'nowhere'"):
        coordinator.list_tables("nowhere")


# ---------------------------------------------------------------- tables and placement


def test_a_table_s_buckets_go_round_robin_and_every_leader_is_told_who_leads_each(
    coordinator: Coordinator, tablets: RecordingTablets
) -> None:
    table_id = coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 6))
    leaders = coordinator.assignment(coordinator.table(ORDERS)).leaders
    assert sorted(leaders) == list(range(6))
    assert {server: sum(1 for s in leaders.values() if s == server) for server in (1, 2, 3)} == {1: 2, 2: 2, 3: 2}
    for server_id in (1, 2, 3):
        assert tablets.leaders_told(server_id)[table_id] == leaders


def test_tables_start_their_round_robin_where_the_last_one_left_off(coordinator: Coordinator) -> None:
    coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 1))
    coordinator.create_table(EVENTS, TableDescriptor(SCHEMA, 1))
    first = coordinator.assignment(coordinator.table(ORDERS)).leaders[0]
    second = coordinator.assignment(coordinator.table(EVENTS)).leaders[0]
    assert first != second


def test_a_table_without_any_tablet_server_is_refused(tmpfs_path: Path, tablets: RecordingTablets) -> None:
    coordinator = coordinator_on(tmpfs_path, tablets, servers=0)
    coordinator.create_database("shop")
    with pytest.raises(NoTabletServerError, match="no tablet server has registered"):
        coordinator.create_table(ORDERS, TableDescriptor(SCHEMA))
    assert coordinator.list_tables("shop") == []


def test_a_second_table_of_a_path_is_refused_and_ignore_gives_the_first_id(coordinator: Coordinator) -> None:
    table_id = coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 2))
    with pytest.raises(TableAlreadyExistError, match="shop.orders"):
        coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 5))
    assert coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 5), ignore_if_exists=True) == table_id
    assert coordinator.table(ORDERS).buckets == 2


@pytest.mark.parametrize(
    ("descriptor", "message"),
    [
        (TableDescriptor(pa.schema([])), "at least one column"),
        (TableDescriptor(SCHEMA, 0), "buckets must be between 1 and 1024"),
        (TableDescriptor(SCHEMA, 2000), "buckets must be between 1 and 1024"),
        (TableDescriptor(pa.schema([("__offset", pa.int64())])), "reserved"),
        (TableDescriptor(SCHEMA, properties={"table.no.such": "1"}), "unknown table property 'table.no.such'"),
        (TableDescriptor(SCHEMA, bucket_keys=("missing",)), "missing"),
        (TableDescriptor(SCHEMA, partition_keys=("id",)), "partition key 'id' has type int64"),
    ],
)
def test_a_bad_table_is_refused_naming_what_is_wrong_and_nothing_is_stored(
    coordinator: Coordinator, tablets: RecordingTablets, descriptor: TableDescriptor, message: str
) -> None:
    with pytest.raises(InvalidTableError, match=message):
        coordinator.create_table(ORDERS, descriptor)
    assert coordinator.list_tables("shop") == []
    assert tablets.told == []


def test_a_table_that_would_pass_a_server_s_bucket_cap_is_refused_naming_the_server(tmpfs_path: Path, tablets: RecordingTablets) -> None:
    coordinator = coordinator_on(tmpfs_path, tablets, servers=2, max_buckets_per_server=4)
    coordinator.create_database("shop")
    coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 6))
    with pytest.raises(TooManyBucketsError, match="tablet server 1, which keeps 3"):
        coordinator.create_table(EVENTS, TableDescriptor(SCHEMA, 4))
    assert coordinator.list_tables("shop") == ["orders"]


def test_a_leader_that_cannot_take_its_buckets_undoes_the_table(coordinator: Coordinator, tablets: RecordingTablets) -> None:
    tablets.refuse[2] = StorageError("too many open files")
    with pytest.raises(StorageError, match="tablet server 2 could not take its buckets .*too many open files.*not created"):
        coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 3))
    assert coordinator.list_tables("shop") == []
    dropped = [told.dropped for told in tablets.told if told.dropped]
    assert dropped, "the leaders told before the refusal drop the table again"


def test_a_leader_out_of_reach_learns_its_buckets_later_and_the_table_is_created(
    coordinator: Coordinator, tablets: RecordingTablets
) -> None:
    tablets.refuse[1] = NetworkError("connection refused")
    coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 3))
    assert coordinator.list_tables("shop") == ["orders"]


def test_a_dropped_table_is_gone_and_its_id_is_dropped_on_every_server(coordinator: Coordinator, tablets: RecordingTablets) -> None:
    table_id = coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 3))
    coordinator.drop_table(ORDERS)
    with pytest.raises(TableNotExistError, match="shop.orders"):
        coordinator.table(ORDERS)
    assert {told.server_id for told in tablets.told if table_id in told.dropped} == {1, 2, 3}
    with pytest.raises(TableNotExistError):
        coordinator.drop_table(ORDERS)
    coordinator.drop_table(ORDERS, ignore_if_not_exists=True)


def test_table_ids_are_never_reused(coordinator: Coordinator) -> None:
    first = coordinator.create_table(ORDERS, TableDescriptor(SCHEMA))
    coordinator.drop_table(ORDERS)
    assert coordinator.create_table(ORDERS, TableDescriptor(SCHEMA)) > first


def test_the_catalog_survives_a_restart_on_the_same_directory(tmpfs_path: Path, coordinator: Coordinator) -> None:
    table_id = coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 4, {"table.log.ttl": "2d"}, comment="orders"))
    leaders = coordinator.assignment(coordinator.table(ORDERS)).leaders
    restarted = coordinator_on(tmpfs_path, RecordingTablets())
    info = restarted.table(ORDERS)
    assert (info.table_id, info.buckets, dict(info.properties), info.comment) == (table_id, 4, {"table.log.ttl": "2d"}, "orders")
    assert info.schema.equals(SCHEMA)
    assert restarted.assignment(info).leaders == leaders


def test_a_restarted_server_registers_and_is_given_every_bucket_it_leads(coordinator: Coordinator) -> None:
    coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 3))
    coordinator.create_table(EVENTS, TableDescriptor(SCHEMA, 3))
    led, lake = coordinator.register_tablet_server(ServerNode(2, "tablet", 9002))
    assert sorted(str(a.info.path) for a in led) == ["shop.events", "shop.orders"]
    for assignment in led:
        everyone = coordinator.assignment(coordinator.table(assignment.info.path)).leaders
        assert 2 in assignment.leaders.values() and assignment.leaders == everyone
    assert lake == []


def test_a_registered_server_learns_what_the_lake_holds_of_the_buckets_it_leads(coordinator: Coordinator) -> None:
    table_id = coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 3, LAKE))
    leaders = coordinator.assignment(coordinator.table(ORDERS)).leaders
    coordinator.commit_lake_snapshot(table_id, LakeSnapshot(7, {b: LakeBucketOffset(0, 10 * (b + 1)) for b in range(3)}))
    server = leaders[1]
    _, lake = coordinator.register_tablet_server(ServerNode(server, "tablet", 9000 + server))
    [offsets] = lake
    assert offsets.snapshot.snapshot_id == 7
    assert offsets.snapshot.bucket_offsets == {b: LakeBucketOffset(0, 10 * (b + 1)) for b, s in leaders.items() if s == server}


# ---------------------------------------------------------------- schema versions


def test_an_alter_adds_a_schema_version_and_keeps_every_older_one(coordinator: Coordinator, tablets: RecordingTablets) -> None:
    coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 2))
    told_before = len(tablets.told)
    schema_id = coordinator.alter_table(ORDERS, [TableChange.add_column("note", pa.string())])
    assert schema_id == 2
    assert coordinator.table_schema(ORDERS, 0).schema.names == ["id", "name", "note"]
    assert coordinator.table_schema(ORDERS, 1).schema.equals(SCHEMA)
    assert coordinator.table_schema(ORDERS, 2).schema_id == 2
    assert len(tablets.told) > told_before, "the leaders learn the new schema"
    with pytest.raises(SchemaNotExistError, match="no schema 3 .*1..2"):
        coordinator.table_schema(ORDERS, 3)


def test_an_alter_of_a_missing_table_is_refused_or_ignored(coordinator: Coordinator) -> None:
    with pytest.raises(TableNotExistError, match="shop.orders"):
        coordinator.alter_table(ORDERS, [TableChange.add_column("note", pa.string())])
    assert coordinator.alter_table(ORDERS, [TableChange.add_column("note", pa.string())], ignore_if_not_exists=True) == 0


def test_a_lake_table_is_evolved_before_the_log_and_a_lake_that_cannot_follow_leaves_the_table_as_it_was(
    coordinator: Coordinator, lake: RecordingLake
) -> None:
    coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 1, LAKE))
    lake.refuse = LakeError("catalog unreachable")
    with pytest.raises(LakeError, match="catalog unreachable"):
        coordinator.alter_table(ORDERS, [TableChange.add_column("note", pa.string())])
    assert coordinator.table(ORDERS).schema_id == 1
    lake.refuse = None
    coordinator.alter_table(ORDERS, [TableChange.add_column("note", pa.string())])
    assert [(path, schema.names) for path, schema in lake.evolved] == [(ORDERS, ["id", "name", "note"])]


# ---------------------------------------------------------------- lake tables


def test_a_lake_table_gets_its_lake_table_first_with_the_format_filled_in(coordinator: Coordinator, lake: RecordingLake) -> None:
    coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 2, LAKE))
    assert [(path, schema.names) for path, schema, _ in lake.created] == [(ORDERS, ["id", "name"])]
    assert coordinator.table(ORDERS).properties[DATALAKE_FORMAT] == "iceberg"


def test_a_lake_format_that_is_not_supported_is_refused_naming_it(coordinator: Coordinator, lake: RecordingLake) -> None:
    with pytest.raises(InvalidTableError, match="table.datalake.format='paimon': the only lake format is iceberg"):
        coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 1, {**LAKE, DATALAKE_FORMAT: "paimon"}))
    assert lake.created == [] and coordinator.list_tables("shop") == []


def test_a_schema_the_lake_refuses_creates_no_table(coordinator: Coordinator, lake: RecordingLake, tablets: RecordingTablets) -> None:
    lake.refuse = LakeError("the lake cannot hold uint64")
    with pytest.raises(LakeError, match="uint64"):
        coordinator.create_table(ORDERS, TableDescriptor(SCHEMA, 1, LAKE))
    assert coordinator.list_tables("shop") == [] and tablets.told == []


# ---------------------------------------------------------------- partitions


def test_partitions_are_created_listed_and_named_by_their_key_values(coordinator: Coordinator, tablets: RecordingTablets) -> None:
    coordinator.create_table(EVENTS, TableDescriptor(DAYS, 2, partition_keys=("dt",)))
    first = coordinator.create_partition(EVENTS, {"dt": "2024-01-01"})
    second = coordinator.create_partition(EVENTS, {"dt": "2024-01-02"})
    assert [p.partition_name for p in coordinator.list_partitions(EVENTS)] == ["2024-01-01", "2024-01-02"]
    assert second.partition_id > first.partition_id
    told = {physical_id for server in (1, 2, 3) for physical_id in tablets.leaders_told(server)}
    assert {first.partition_id, second.partition_id} <= told


def test_a_partitioned_table_has_no_buckets_of_its_own(coordinator: Coordinator) -> None:
    coordinator.create_table(EVENTS, TableDescriptor(DAYS, 4, partition_keys=("dt",)))
    assert coordinator.assignment(coordinator.table(EVENTS)).leaders == {}


def test_a_partition_twice_is_refused_unless_ignored_and_a_table_without_keys_has_none(coordinator: Coordinator) -> None:
    coordinator.create_table(EVENTS, TableDescriptor(DAYS, 1, partition_keys=("dt",)))
    made = coordinator.create_partition(EVENTS, {"dt": "d1"})
    with pytest.raises(PartitionAlreadyExistsError, match="'d1'"):
        coordinator.create_partition(EVENTS, {"dt": "d1"})
    assert coordinator.create_partition(EVENTS, {"dt": "d1"}, ignore_if_exists=True) == made
    coordinator.create_table(ORDERS, TableDescriptor(SCHEMA))
    with pytest.raises(InvalidPartitionError, match="shop.orders is not partitioned"):
        coordinator.create_partition(ORDERS, {"dt": "d1"})


@pytest.mark.parametrize("value", ["a/b", "..", "", "x y"])
def test_a_partition_value_that_could_reach_a_path_is_refused(coordinator: Coordinator, value: str) -> None:
    coordinator.create_table(EVENTS, TableDescriptor(DAYS, 1, partition_keys=("dt",)))
    with pytest.raises(InvalidPartitionError):
        coordinator.create_partition(EVENTS, {"dt": value})
    assert coordinator.list_partitions(EVENTS) == []


def test_partitions_past_max_partition_num_are_refused(tmpfs_path: Path, tablets: RecordingTablets) -> None:
    coordinator = coordinator_on(tmpfs_path, tablets, max_partitions=2)
    coordinator.create_database("shop")
    coordinator.create_table(EVENTS, TableDescriptor(DAYS, 1, partition_keys=("dt",)))
    coordinator.create_partition(EVENTS, {"dt": "d1"})
    coordinator.create_partition(EVENTS, {"dt": "d2"})
    with pytest.raises(TooManyPartitionsError, match="max.partition.num"):
        coordinator.create_partition(EVENTS, {"dt": "d3"})


def test_a_log_only_partition_is_dropped_and_its_leaders_drop_it(coordinator: Coordinator, tablets: RecordingTablets) -> None:
    coordinator.create_table(EVENTS, TableDescriptor(DAYS, 1, partition_keys=("dt",)))
    partition = coordinator.create_partition(EVENTS, {"dt": "d1"})
    coordinator.drop_partition(EVENTS, {"dt": "d1"})
    assert coordinator.list_partitions(EVENTS) == []
    assert any(partition.partition_id in told.dropped for told in tablets.told)
    with pytest.raises(PartitionNotExistError, match="'d1'"):
        coordinator.drop_partition(EVENTS, {"dt": "d1"})


def _lake_partition(coordinator: Coordinator, tablets: RecordingTablets, high_watermark: int) -> tuple[int, int]:
    """A lake-enabled partitioned table with partition d1 (one bucket, ``high_watermark`` records
    in the log); its table id and the partition's id."""
    table_id = coordinator.create_table(EVENTS, TableDescriptor(DAYS, 1, LAKE, partition_keys=("dt",)))
    partition = coordinator.create_partition(EVENTS, {"dt": "d1"})
    leader = coordinator.assignment_by_id(partition.partition_id).leaders[0]
    tablets.described[partition.partition_id] = {0: BucketInfo(leader, high_watermark, 0)}
    return table_id, partition.partition_id


def test_a_lake_partition_the_lake_lacks_keeps_its_log_and_its_fence_is_lifted(coordinator: Coordinator, tablets: RecordingTablets) -> None:
    table_id, partition_id = _lake_partition(coordinator, tablets, high_watermark=50)
    coordinator.commit_lake_snapshot(table_id, LakeSnapshot(1, {(partition_id, 0): LakeBucketOffset(0, 20)}))
    with pytest.raises(PartitionNotInLakeError, match="the log ends at 50, the lake at 20"):
        coordinator.drop_partition(EVENTS, {"dt": "d1"})
    leaders = coordinator.assignment_by_id(partition_id).leaders
    told = [a.leaders for t in tablets.told for a in t.tables if a.info.physical_id == partition_id]
    assert told[-2:] == [fenced_leaders(leaders), leaders], "fenced for the check, then plain again"
    assert [p.partition_name for p in coordinator.list_partitions(EVENTS)] == ["d1"]


def test_a_lake_partition_the_lake_holds_is_dropped_from_the_log_and_stays_listed_lake_only(
    coordinator: Coordinator, tablets: RecordingTablets
) -> None:
    table_id, partition_id = _lake_partition(coordinator, tablets, high_watermark=50)
    coordinator.commit_lake_snapshot(table_id, LakeSnapshot(1, {(partition_id, 0): LakeBucketOffset(0, 50)}))
    coordinator.drop_partition(EVENTS, {"dt": "d1"})
    [kept] = coordinator.list_partitions(EVENTS)
    assert (kept.partition_id, kept.lake_only) == (partition_id, True)
    with pytest.raises(PartitionAlreadyExistsError, match="held by the lake only; its name is not reused"):
        coordinator.create_partition(EVENTS, {"dt": "d1"})


def test_a_lake_partition_whose_leader_does_not_answer_is_not_dropped(coordinator: Coordinator, tablets: RecordingTablets) -> None:
    table_id, partition_id = _lake_partition(coordinator, tablets, high_watermark=50)
    tablets.described.clear()
    with pytest.raises(PartitionNotInLakeError, match="did not answer"):
        coordinator.drop_partition(EVENTS, {"dt": "d1"})
    assert not coordinator.list_partitions(EVENTS)[0].lake_only
