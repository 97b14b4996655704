"""A client cannot exhaust a tablet server's files or its time: what would pass a limit is refused
with an error naming the limit, and the server keeps serving the others (the answer budget's
fairness between connections: tests/system/test_hostile_clients.py).

- Tables past what the open-file limit holds: refused (TooManyBucketsError naming
  ``coordinator.max-buckets-per-tablet-server``), never answered OK and then unwritable.
- A FetchLog (or ListOffsets, DescribeLogBuckets) naming 100,000 buckets: refused (INVALID_ARGUMENT
  naming the count and the cap) before any bucket is read; lakelog's own scanner fetches a table of
  the most buckets there are.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

import lakelog
from bench.hostile_clients import fetch_request
from lakelog.errors import StorageError
from lakelog.metadata import MAX_BUCKETS
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceStub
from lakelog.server.open_file_limit import buckets_within
from lakelog.server.rpc.tablet_service import MAX_FETCH_BUCKETS
from tests.harness.server_subprocess import ServerSubprocess
from tests.harness.tables import create_table, order_rows, scan_all

TABLES = 1200
BUCKETS = 8
# Soft and hard limits of the server process: the server raises the soft one to the hard one, and
# the hard one is small enough that today's 1,200 tables would pass it several times over.
OPEN_FILES = (1024, 4096)
ROWS = 2 * BUCKETS


def _produce_and_read(conn: lakelog.Connection, path: lakelog.TablePath, start: int) -> list[int]:
    """``ROWS`` rows from ``start`` written to the table; the ids a scan of every bucket reads back
    from ``start`` on."""
    table = conn.get_table(path)
    writer = table.new_append().create_writer()
    writer.append_arrow(order_rows(start, ROWS))
    writer.flush()
    with table.new_scan().project(["id"]).create_log_scanner() as scanner:
        scanner.subscribe_from_beginning()
        ids = scan_all(scanner, start + ROWS, timeout_s=30).column("id").to_pylist()
    return sorted(ids)[start:]


def _create_tables(conn: lakelog.Connection, count: int, refusal: type[lakelog.LakelogError]) -> tuple[list[lakelog.TablePath], list[lakelog.LakelogError]]:
    """``count`` tables of ``BUCKETS`` buckets created in database ``many``, one after the other:
    those created, and the refusals (each a ``refusal``)."""
    conn.admin.create_database("many")
    created: list[lakelog.TablePath] = []
    refusals: list[lakelog.LakelogError] = []
    for number in range(count):
        path = lakelog.TablePath("many", f"t{number}")
        try:
            conn.admin.create_table(path, lakelog.TableDescriptor(order_rows(0, 1).schema, BUCKETS))
            created.append(path)
        except refusal as refused:
            refusals.append(refused)
    return created, refusals


def _check_every_created_table_works(conn: lakelog.Connection, created: list[lakelog.TablePath]) -> None:
    """Exactly the created tables are listed, each takes a produce and reads it back, the first
    one still does after all the others, and the room of dropped tables takes a new table."""
    assert sorted(conn.admin.list_tables("many")) == sorted(path.table for path in created)
    for path in created:
        assert _produce_and_read(conn, path, 0) == list(range(ROWS)), path
    assert _produce_and_read(conn, created[0], ROWS) == list(range(ROWS, 2 * ROWS))
    for path in created[-4:]:
        conn.admin.drop_table(path)
    again = lakelog.TablePath("many", "again")
    conn.admin.create_table(again, lakelog.TableDescriptor(order_rows(0, 1).schema, BUCKETS))
    assert _produce_and_read(conn, again, 0) == list(range(ROWS))


def test_tables_past_the_open_file_limit_are_refused_and_every_created_table_works(tmp_path: Path) -> None:
    server = ServerSubprocess(tmp_path / "data", open_files=OPEN_FILES).start()
    try:
        # A short delivery timeout: a table its leader cannot open fails its produce in seconds.
        with lakelog.connect(server.address, config={"client.writer.delivery-timeout": "5s"}) as conn:
            created, refusals = _create_tables(conn, TABLES, lakelog.TooManyBucketsError)
            # The cap is what the raised (hard) limit holds, not the soft limit the process started with.
            assert len(created) == buckets_within(OPEN_FILES[1]) // BUCKETS
            assert len(refusals) == TABLES - len(created)
            assert "coordinator.max-buckets-per-tablet-server" in refusals[0].message
            assert f"= {buckets_within(OPEN_FILES[1])}" in refusals[0].message
            _check_every_created_table_works(conn, created)
            descriptor = lakelog.TableDescriptor(order_rows(0, 1).schema, BUCKETS)
            for number in range(3):  # the room of the other three dropped tables, and no more
                conn.admin.create_table(lakelog.TablePath("many", f"more{number}"), descriptor)
            with pytest.raises(lakelog.TooManyBucketsError):
                conn.admin.create_table(lakelog.TablePath("many", "one-more"), descriptor)
    finally:
        server.stop()


def test_a_table_its_leader_cannot_open_is_refused_and_not_created_when_the_cap_is_set_too_high(tmp_path: Path) -> None:
    """The cap set past what the server's open files hold (or a tablet server with fewer open files
    than its coordinator): a table whose leader cannot open its buckets is refused with the
    leader's StorageError and is not created; every table created works."""
    server = ServerSubprocess(
        tmp_path / "data", "--set", "coordinator.max-buckets-per-tablet-server=100000", open_files=(OPEN_FILES[0], OPEN_FILES[0])
    ).start()
    try:
        with lakelog.connect(server.address, config={"client.writer.delivery-timeout": "5s"}) as conn:
            created, refusals = _create_tables(conn, TABLES // 4, StorageError)
            assert created and refusals
            assert all("could not take its buckets" in refused.message and "it is not created" in refused.message for refused in refusals)
            assert "Too many open files" in refusals[0].message
            _check_every_created_table_works(conn, created)
    finally:
        server.stop()


def test_partitions_and_tables_past_a_configured_cap_are_refused(server_factory) -> None:  # noqa: ANN001
    """With ``coordinator.max-buckets-per-tablet-server`` = 10: two partitions of 4 buckets and a
    table of 2 fit, a third partition and another table do not; dropping a partition makes room."""
    server = server_factory(**{"coordinator.max-buckets-per-tablet-server": 10})
    with lakelog.connect(server.address) as conn:
        conn.admin.create_database("capped")
        schema = order_rows(0, 1).schema
        partitioned = lakelog.TablePath("capped", "by_name")
        conn.admin.create_table(partitioned, lakelog.TableDescriptor(schema, 4, partition_keys=["name"]))
        conn.admin.create_partition(partitioned, {"name": "a"})
        conn.admin.create_partition(partitioned, {"name": "b"})
        conn.admin.create_table(lakelog.TablePath("capped", "small"), lakelog.TableDescriptor(schema, 2))
        with pytest.raises(lakelog.TooManyBucketsError, match=r"partition c of capped.by_name.*keeps 10.*= 10"):
            conn.admin.create_partition(partitioned, {"name": "c"})
        with pytest.raises(lakelog.TooManyBucketsError, match=r"table capped.big"):
            conn.admin.create_table(lakelog.TablePath("capped", "big"), lakelog.TableDescriptor(schema, 1))
        assert [p.partition_name for p in conn.admin.list_partition_infos(partitioned)] == ["a", "b"]
        assert conn.admin.list_tables("capped") == ["by_name", "small"]
        conn.admin.drop_partition(partitioned, {"name": "a"})
        conn.admin.create_partition(partitioned, {"name": "c"})


def test_requests_naming_100000_buckets_are_refused_and_the_next_fetch_is_served(server, conn: lakelog.Connection) -> None:  # noqa: ANN001
    table = create_table(conn)
    writer = table.new_append().create_writer()
    writer.append_arrow(order_rows(0, 10))
    writer.flush()
    huge = fetch_request(table.info.table_id, 0, 1024, 0)
    bucket = huge.tables_req[0].buckets_req[0]
    huge.tables_req[0].buckets_req.extend([bucket] * 99_999)
    with grpc.insecure_channel(server.address) as channel:
        stub = TabletServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.FetchLog(huge, timeout=60)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert f"FetchLog names 100000 buckets, at most {MAX_FETCH_BUCKETS}" in refused.value.details()
        for method, request in (
            (stub.ListOffsets, pb.ListOffsetsRequest(table_id=table.info.table_id, bucket_id=[0] * 100_000)),
            (stub.DescribeLogBuckets, pb.DescribeLogBucketsRequest(table_id=table.info.table_id, bucket_id=[0] * 100_000)),
        ):
            with pytest.raises(grpc.RpcError) as refused:
                method(request, timeout=60)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert f"names 100000 buckets, at most {MAX_FETCH_BUCKETS}" in refused.value.details()
        answer = stub.FetchLog(fetch_request(table.info.table_id, 0, 1 << 20, 0), timeout=60)
    (served,) = answer.tables_resp[0].buckets_resp
    assert served.error_code == 0 and served.high_watermark == 10 and served.records


def test_a_scanner_of_a_table_of_the_most_buckets_fetches_within_the_cap(server, conn: lakelog.Connection) -> None:  # noqa: ANN001
    """Every bucket of the widest table on one server, subscribed by one scanner: its fetches are
    served (none names more buckets than the server takes)."""
    table = create_table(conn, buckets=MAX_BUCKETS)
    writer = table.new_append().create_writer()
    for bucket in range(MAX_BUCKETS):
        writer.append({"id": bucket, "name": "n", "amount": 0.5}, bucket=bucket)
    writer.flush()
    with table.new_scan().project(["id"]).create_log_scanner() as scanner:
        scanner.subscribe_from_beginning()
        ids = scan_all(scanner, MAX_BUCKETS).column("id").to_pylist()
    assert sorted(ids) == list(range(MAX_BUCKETS))
