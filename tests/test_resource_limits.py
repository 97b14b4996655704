"""A client cannot exhaust a tablet server's files or its time: what would pass a limit is refused
with an error naming the limit, and the server keeps serving the others (the answer budget's
fairness between connections: tests/test_hostile_clients.py).

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
from lakelog.metadata import MAX_BUCKETS
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceStub
from lakelog.server.open_file_limit import buckets_within
from lakelog.server.rpc.tablet_service import MAX_FETCH_BUCKETS
from tests.conftest import ServerSubprocess, create_table, order_rows, scan_all

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


def test_tables_past_the_open_file_limit_are_refused_and_every_created_table_works(tmp_path: Path) -> None:
    server = ServerSubprocess(tmp_path / "data", open_files=OPEN_FILES).start()
    created: list[lakelog.TablePath] = []
    refusals: list[lakelog.TooManyBucketsError] = []
    try:
        # A short delivery timeout: a table its leader cannot open fails its produce in seconds.
        with lakelog.connect(server.address, config={"client.writer.delivery-timeout": "5s"}) as conn:
            conn.admin.create_database("many")
            schema = order_rows(0, 1).schema
            for number in range(TABLES):
                path = lakelog.TablePath("many", f"t{number}")
                try:
                    conn.admin.create_table(path, lakelog.TableDescriptor(schema, BUCKETS))
                    created.append(path)
                except lakelog.TooManyBucketsError as refused:
                    refusals.append(refused)
            # The cap is what the raised (hard) limit holds, not the soft limit the process started with.
            assert len(created) == buckets_within(OPEN_FILES[1]) // BUCKETS
            assert len(refusals) == TABLES - len(created)
            assert "coordinator.max-buckets-per-tablet-server" in refusals[0].message
            assert f"= {buckets_within(OPEN_FILES[1])}" in refusals[0].message
            assert sorted(conn.admin.list_tables("many")) == sorted(path.table for path in created)
            for path in created:
                assert _produce_and_read(conn, path, 0) == list(range(ROWS)), path
            # The first table still takes writes once every other was written, and the server serves.
            assert _produce_and_read(conn, created[0], ROWS) == list(range(ROWS, 2 * ROWS))
            conn.admin.drop_table(created[-1])
            conn.admin.create_table(lakelog.TablePath("many", "again"), lakelog.TableDescriptor(schema, BUCKETS))
            assert _produce_and_read(conn, lakelog.TablePath("many", "again"), 0) == list(range(ROWS))
            with pytest.raises(lakelog.TooManyBucketsError):
                conn.admin.create_table(lakelog.TablePath("many", "one-more"), lakelog.TableDescriptor(schema, BUCKETS))
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
        with pytest.raises(lakelog.TooManyBucketsError, match=r"partition c of capped.by_name.*leads 10.*= 10"):
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
