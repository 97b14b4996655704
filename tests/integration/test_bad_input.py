"""Bad names, unknown tables and buckets, negative offsets and schema mismatches get clear errors."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakelog
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceStub
from tests.harness.membership import member_metadata
from tests.harness.tables import ORDERS_SCHEMA, create_table, order_rows


@pytest.mark.parametrize("name", ["", "-starts-with-dash", "has space", "dot.ted", "../escape", "x" * 129, "slash/es"])
def test_bad_table_name_is_refused(name: str) -> None:
    with pytest.raises(lakelog.InvalidNameError, match="invalid table name"):
        lakelog.TablePath("shop", name)


def test_bad_names_refused_by_the_server(server) -> None:
    """A client that skips validation still cannot reach a file path with a bad name."""
    import grpc

    from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceStub

    with grpc.insecure_channel(server.address) as channel:
        stub = CoordinatorServiceStub(channel)
        with pytest.raises(grpc.RpcError) as info:
            stub.CreateDatabase(pb.CreateDatabaseRequest(database_name="../etc"))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "invalid database name '../etc'" in info.value.details()


def test_unknown_table(conn: lakelog.Connection) -> None:
    conn.admin.create_database("shop")
    with pytest.raises(lakelog.TableNotExistError, match="table shop.nope does not exist"):
        conn.get_table(lakelog.TablePath("shop", "nope"))
    with pytest.raises(lakelog.DatabaseNotExistError, match="database 'nodb' does not exist"):
        conn.admin.list_tables("nodb")


def test_unknown_bucket(conn: lakelog.Connection) -> None:
    table = create_table(conn, buckets=2)
    scanner = table.new_scan().create_log_scanner()
    with pytest.raises(lakelog.UnknownBucketError, match="shop.orders has no bucket 2"):
        scanner.subscribe(2, 0)
    with pytest.raises(lakelog.UnknownBucketError, match="no bucket 5"):
        conn.admin.list_offsets(table.path, [5])
    writer = table.new_append().create_writer()
    with pytest.raises(lakelog.UnknownBucketError):
        writer.append({"id": 1, "name": "a", "amount": 1.0}, bucket=7)


def test_unknown_bucket_refused_by_the_server(server, conn: lakelog.Connection) -> None:
    import grpc

    table = create_table(conn, buckets=2)
    with grpc.insecure_channel(server.address) as channel:
        response = TabletServiceStub(channel).FetchLog(
            pb.FetchLogRequest(
                max_bytes=1024,
                tables_req=[
                    pb.PbFetchLogReqForTable(
                        table_id=table.info.table_id,
                        buckets_req=[
                            pb.PbFetchLogReqForBucket(bucket_id=9, fetch_offset=0, max_fetch_bytes=1024),
                            pb.PbFetchLogReqForBucket(bucket_id=0, fetch_offset=-3, max_fetch_bytes=1024),
                        ],
                    )
                ],
            )
        )
    unknown, negative = response.tables_resp[0].buckets_resp
    assert unknown.error_code == lakelog.UnknownBucketError.code and "no bucket 9" in unknown.error_message
    assert negative.error_code == lakelog.InvalidRequestError.code and "-3" in negative.error_message


def test_negative_offset(conn: lakelog.Connection) -> None:
    table = create_table(conn)
    with pytest.raises(lakelog.InvalidRequestError, match="negative offset -1"):
        table.new_scan().create_log_scanner().subscribe(0, -1)


def test_offset_past_the_end(conn: lakelog.Connection) -> None:
    table = create_table(conn)
    writer = table.new_append().create_writer()
    writer.append_arrow(order_rows(0, 10))
    writer.flush()
    scanner = table.new_scan().create_log_scanner()
    scanner.subscribe(0, 11)
    with pytest.raises(lakelog.OffsetOutOfRangeError) as info:
        scanner.poll(timeout_ms=2000)
    assert (info.value.bucket, info.value.offset, info.value.earliest) == (0, 11, 0)


def test_schema_mismatch_on_append(conn: lakelog.Connection) -> None:
    table = create_table(conn)
    writer = table.new_append().create_writer()
    with pytest.raises(lakelog.SchemaMismatchError, match=r"has no column\(s\) \['colour'\]"):
        writer.append({"id": 1, "colour": "red"})
    wrong = pa.record_batch([pa.array(["x"]), pa.array([1])], names=["id", "name"])
    with pytest.raises(lakelog.SchemaMismatchError, match="column 'id' of type string does not fit int64"):
        writer.append_arrow(wrong)
    uncastable = pa.record_batch(
        [pa.array(["not a number"]), pa.array(["n"]), pa.array([1.0])], names=ORDERS_SCHEMA.names
    )
    with pytest.raises(lakelog.SchemaMismatchError, match="does not fit"):
        writer.append_arrow(uncastable)
    writer.append({"id": 1, "name": "ok", "amount": 2.0})
    writer.append({"id": "two", "name": "bad", "amount": 2.0})
    writer.append({"id": 2.5, "name": "truncated", "amount": 2.0})
    with pytest.raises(lakelog.SchemaMismatchError, match="2 row\\(s\\) do not match") as info:
        writer.flush()
    assert "column 'id' is int64 and 'two' does not fit it" in str(info.value) and "\n" not in str(info.value)
    writer.flush()
    assert conn.admin.list_offsets(table.path)[0] == 1, "the good row was kept and written"


@pytest.mark.parametrize("alone", [True, False], ids=["alone", "after-a-good-batch-in-one-request"])
def test_server_refuses_a_batch_of_another_schema(server, conn: lakelog.Connection, alone: bool) -> None:
    """A client that skips its own checks still cannot write rows of the wrong shape, also after
    batches of the right schema were accepted (the server remembers their schema message)."""
    import grpc

    from lakelog.record.batch import encode_batch

    table = create_table(conn)
    with table.new_append().create_writer() as writer:
        writer.append_arrow(order_rows(1, 1))
    good = encode_batch(order_rows(2, 3), schema_id=table.info.schema_id)
    alien = encode_batch(pa.record_batch([pa.array([1])], names=["x"]), schema_id=table.info.schema_id)
    with grpc.insecure_channel(server.address) as channel:
        response = TabletServiceStub(channel).ProduceLog(
            pb.ProduceLogRequest(
                table_id=table.info.table_id,
                buckets_req=[pb.PbProduceLogReqForBucket(bucket_id=0, records=alien if alone else good + alien)],
            )
        )
    item = response.buckets_resp[0]
    assert item.error_code == lakelog.SchemaMismatchError.code
    assert "does not match table schema" in item.error_message
    assert conn.admin.list_offsets(table.path)[0] == 1, "nothing of the refused request was written"


def test_create_table_errors(conn: lakelog.Connection) -> None:
    conn.admin.create_database("shop")
    path = lakelog.TablePath("shop", "t")
    conn.admin.create_table(path, lakelog.TableDescriptor(ORDERS_SCHEMA))
    with pytest.raises(lakelog.TableAlreadyExistError, match="shop.t already exists"):
        conn.admin.create_table(path, lakelog.TableDescriptor(ORDERS_SCHEMA))
    conn.admin.create_table(path, lakelog.TableDescriptor(ORDERS_SCHEMA), ignore_if_exists=True)
    with pytest.raises(lakelog.InvalidTableError, match="buckets must be between"):
        conn.admin.create_table(lakelog.TablePath("shop", "u"), lakelog.TableDescriptor(ORDERS_SCHEMA, buckets=0))
    with pytest.raises(lakelog.InvalidTableError, match="reserved"):
        conn.admin.create_table(
            lakelog.TablePath("shop", "u"), lakelog.TableDescriptor(pa.schema([("__offset", pa.int64())]))
        )
    with pytest.raises(lakelog.DatabaseNotExistError):
        conn.admin.create_table(lakelog.TablePath("nodb", "u"), lakelog.TableDescriptor(ORDERS_SCHEMA))


@pytest.mark.parametrize(
    ("properties", "named"),
    [
        ({"table.log.ttl": "-1d"}, "table.log.ttl='-1d'"),
        ({"table.log.ttl": "0ms"}, "table.log.ttl='0ms': must be between 1ms and 36500d"),
        ({"table.log.ttl": "99999999999999999999"}, "table.log.ttl='99999999999999999999': must be between 1ms and 36500d"),
        ({"table.log.tiered.local-segments": "0"}, "table.log.tiered.local-segments='0': must be between 1 and 1000"),
        ({"table.log.tiered.local-segments": "99999999999999999999"}, "local-segments='99999999999999999999': must be between 1 and 1000"),
        ({"table.auto-partition.num-precreate": "1000000"}, "num-precreate='1000000': must be between 0 and 1000"),
        ({"table.auto-partition.num-retention": "99999999999999999999"}, "num-retention='99999999999999999999': must be between 0 and 1000000"),
        ({"table.log.tiered.local-segments": "abc"}, "table.log.tiered.local-segments='abc'"),
        ({"table.datalake.enabled": "maybe"}, "table.datalake.enabled='maybe': must be true or false"),
        ({"table.datalake.format": "paimon"}, "table.datalake.format='paimon'"),
        ({"table.log.tll": "1d"}, "unknown table property 'table.log.tll'"),
    ],
)
def test_bad_table_properties_are_refused_at_create_naming_key_and_value(
    conn: lakelog.Connection, properties: dict[str, str], named: str
) -> None:
    conn.admin.create_database("shop")
    path = lakelog.TablePath("shop", "t")
    with pytest.raises(lakelog.InvalidTableError, match="table shop.t: ") as info:
        conn.admin.create_table(path, lakelog.TableDescriptor(ORDERS_SCHEMA, properties=properties))
    assert named in str(info.value)
    assert conn.admin.list_tables("shop") == []
    table = create_table(conn, properties={"table.log.ttl": "2d", "owner": "team-a"})  # the server goes on
    assert table.info.properties["owner"] == "team-a"


def test_auto_partitioning_that_reaches_past_the_years_a_date_holds_is_refused(conn: lakelog.Connection) -> None:
    conn.admin.create_database("shop")
    properties = {"table.auto-partition.enabled": "true", "table.auto-partition.time-unit": "year", "table.auto-partition.num-retention": "5000"}
    descriptor = lakelog.TableDescriptor(ORDERS_SCHEMA, properties=properties, partition_keys=["name"])
    with pytest.raises(lakelog.InvalidTableError, match="num-retention=5000 years reach past the years 1 to 9999"):
        conn.admin.create_table(lakelog.TablePath("shop", "yearly"), descriptor)
    assert conn.admin.list_tables("shop") == []


def test_oversized_comments_and_a_zero_bucket_count_are_refused(server, conn: lakelog.Connection) -> None:
    import grpc

    from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceStub

    huge = "x" * (50 << 20)
    with pytest.raises(lakelog.InvalidRequestError, match="database shop: comment of 52428800 bytes, at most 65536"):
        conn.admin.create_database("shop", comment=huge)
    conn.admin.create_database("shop")
    with pytest.raises(lakelog.InvalidRequestError, match="table shop.t: comment of 52428800 bytes"):
        conn.admin.create_table(lakelog.TablePath("shop", "t"), lakelog.TableDescriptor(ORDERS_SCHEMA, comment=huge))
    request = pb.CreateTableRequest(
        table_path=pb.PbTablePath(database_name="shop", table_name="t"), schema=ORDERS_SCHEMA.serialize().to_pybytes(), bucket_count=0
    )
    with grpc.insecure_channel(server.address) as channel:
        with pytest.raises(grpc.RpcError) as info:
            CoordinatorServiceStub(channel).CreateTable(request)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "buckets must be between 1 and 1024, got 0" in info.value.details()
    assert conn.admin.list_tables("shop") == []


def test_lake_offsets_that_are_not_ranges_or_name_no_table_are_refused(server, conn: lakelog.Connection) -> None:
    import grpc

    from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceStub

    table = create_table(conn, buckets=2, properties={"table.datalake.enabled": "true"})
    table_id = table.info.table_id

    def notify(**fields: int) -> grpc.RpcError:
        item = pb.PbNotifyLakeTableOffsetReqForBucket(**{"table_id": table_id, "snapshot_id": 7, **fields})
        with grpc.insecure_channel(server.address) as channel:
            with pytest.raises(grpc.RpcError) as info:
                TabletServiceStub(channel).NotifyLakeTableOffset(
                    pb.NotifyLakeTableOffsetRequest(notify_buckets_req=[item]), metadata=member_metadata(server)
                )
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        return info.value

    assert "notify_buckets_req[0]: log_start_offset 10 is past log_end_offset 2" in notify(log_start_offset=10, log_end_offset=2).details()
    assert "notify_buckets_req[0].bucket_id 5: the table has no bucket 5 (it has buckets 0..1)" in notify(bucket_id=5, log_end_offset=2).details()
    assert "notify_buckets_req[0].table_id 99 is not a table" in notify(table_id=99, log_end_offset=2).details()
    assert "notify_buckets_req[0].log_start_offset -4 is negative" in notify(log_start_offset=-4).details()
    assert conn.admin.describe_buckets(table.path)[0].lake_log_end_offset == -1, "nothing was applied"

    def commit(table_id: int, *buckets: pb.PbLakeTableOffsetForBucket) -> pb.PbCommitLakeTableSnapshotRespForTable:
        request = pb.CommitLakeTableSnapshotRequest(
            tables_req=[pb.PbLakeTableSnapshotInfo(table_id=table_id, snapshot_id=3, buckets_req=list(buckets))]
        )
        with grpc.insecure_channel(server.address) as channel:
            return CoordinatorServiceStub(channel).CommitLakeTableSnapshot(request).table_resp[0]

    backwards = commit(table_id, pb.PbLakeTableOffsetForBucket(bucket_id=0, log_start_offset=10, log_end_offset=2))
    assert backwards.error_code == lakelog.InvalidRequestError.code
    assert "tables_req[0].buckets_req[0]: log_start_offset 10 is past log_end_offset 2" in backwards.error_message
    twice = commit(table_id, *[pb.PbLakeTableOffsetForBucket(bucket_id=1, log_end_offset=4)] * 2)
    assert "tables_req[0].buckets_req[1].bucket_id 1 appears twice" in twice.error_message
    unknown = commit(99, pb.PbLakeTableOffsetForBucket(bucket_id=0, log_end_offset=4))
    assert unknown.error_code == lakelog.TableNotExistError.code and "table id 99" in unknown.error_message
    with pytest.raises(lakelog.LakeSnapshotNotExistError):
        conn.admin.get_lake_snapshot(table.path)


def test_names_of_100000_characters_are_refused_as_invalid_with_the_name_cut(server) -> None:  # noqa: ANN001
    """The name is echoed cut (its start, its end and how much was cut), so the answer is the
    INVALID_ARGUMENT of a bad name, not a status too large for the client to read."""
    import grpc

    from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceStub

    long_name = "n" * 100_000
    with grpc.insecure_channel(server.address) as channel:
        stub = CoordinatorServiceStub(channel)
        for call, request in (
            (stub.CreateDatabase, pb.CreateDatabaseRequest(database_name=long_name)),
            (stub.CreateTable, pb.CreateTableRequest(table_path=pb.PbTablePath(database_name="shop", table_name=long_name))),
            (stub.GetTableInfo, pb.GetTableInfoRequest(table_path=pb.PbTablePath(database_name=long_name, table_name="t"))),
        ):
            with pytest.raises(grpc.RpcError) as info:
                call(request, timeout=30)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
            details = info.value.details()
            assert "name 'nnnn" in details and "bytes cut]" in details and "names match [A-Za-z0-9_]" in details
            assert len(details) <= lakelog.errors.MAX_MESSAGE_BYTES
        stub.CreateDatabase(pb.CreateDatabaseRequest(database_name="shop"), timeout=30)  # the server goes on
    with pytest.raises(lakelog.InvalidNameError, match=r"bytes cut\].*names match") as refused:
        lakelog.TablePath("shop", long_name)
    assert len(refused.value.message) <= lakelog.errors.MAX_MESSAGE_BYTES
