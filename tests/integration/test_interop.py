"""Arrow tools read what lakelog returns and write what they hold (docs/contract.md, "Operations"), on a real server:
pandas, polars and DuckDB through the Arrow PyCapsule stream, ``to_arrow``/``to_pandas``/batch
readers on the scanner, and every kind of input ``append_arrow`` takes."""

from __future__ import annotations

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import lakelog
from tests.harness.tables import ORDERS_SCHEMA, create_table, order_rows, produce_orders

COLUMNS = ORDERS_SCHEMA.names


def sorted_rows(table: pa.Table) -> list[dict]:
    return sorted(table.select(COLUMNS).to_pylist(), key=lambda row: row["id"])


def expected_rows(start: int, count: int) -> list[dict]:
    return order_rows(start, count).to_pylist()


def test_poll_records_read_by_pyarrow_pandas_polars_and_duckdb(conn: lakelog.Connection) -> None:
    table = create_table(conn, buckets=2)
    with table.new_append().create_writer() as writer:
        writer.append_arrow(order_rows(0, 25), bucket=0)
        writer.append_arrow(order_rows(25, 15), bucket=1)
    with table.new_scan().create_log_scanner() as scanner:
        scanner.subscribe_from_beginning()
        records = scanner.poll(timeout_ms=5000)  # one tablet server answers both buckets at once
    assert len(records) == 40 and records.buckets() == [0, 1]

    assert sorted_rows(pa.table(records)) == expected_rows(0, 40)
    assert pa.table(records).schema.names == [*COLUMNS, "__bucket", "__offset", "__timestamp"]

    frame = records.to_pandas()
    assert isinstance(frame, pd.DataFrame)
    assert sorted(frame["id"].tolist()) == list(range(40))
    assert frame["amount"].sum() == sum(i * 0.5 for i in range(40))

    polars_frame = pl.DataFrame(records)
    assert polars_frame.height == 40
    assert polars_frame.sort("id")["name"].to_list() == [f"n{i}" for i in range(40)]
    assert pl.from_arrow(records.to_arrow()).equals(polars_frame)

    per_bucket = duckdb.sql("select __bucket, count(*), max(__offset) from records group by __bucket order by 1").fetchall()
    assert per_bucket == [(0, 25, 24), (1, 15, 14)]
    assert duckdb.sql("select sum(id) from records").fetchall()[0] == (sum(range(40)),)


def test_to_arrow_reads_to_the_latest_offsets_of_the_call_and_loses_nothing(conn: lakelog.Connection) -> None:
    table = create_table(conn, buckets=3)
    produce_orders(table, 0, 300)
    with table.new_scan().create_log_scanner() as scanner:
        scanner.subscribe_from_beginning()
        reader = scanner.to_arrow_batch_reader()  # the end offsets are taken here
        produce_orders(table, 300, 90)
        first = reader.read_all()
        assert sorted_rows(first) == expected_rows(0, 300), "records appended after the call are not read"
        assert sum(scanner.positions().values()) == 300

        second = scanner.to_arrow()
        assert sorted_rows(second) == expected_rows(300, 90), "the records past the first end come next, none lost"
        assert scanner.to_arrow().num_rows == 0, "at the end: an empty table, not a wait"

        produce_orders(table, 390, 10)
        frame = scanner.to_pandas()
        assert sorted(frame["id"].tolist()) == list(range(390, 400))
        assert scanner.poll(timeout_ms=200).to_arrow().num_rows == 0


def test_batch_reader_streams_a_poll_at_a_time(server_factory) -> None:
    server = server_factory()
    small_fetches = {"client.scanner.fetch.max-bytes": "16kb", "client.scanner.fetch.max-bytes-per-bucket": "16kb"}
    with lakelog.connect(server.address, small_fetches) as conn:
        table = create_table(conn, buckets=1)
        produce_orders(table, 0, 20_000, batch=500)
        with table.new_scan().project(["id"]).create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            reader = scanner.to_arrow_batch_reader()
            first = reader.read_next_batch()
            assert scanner.positions()[0] < 20_000, "the first batch comes before the whole table is read"
            rest = duckdb.sql("select count(*), min(id), max(id) from reader").fetchall()[0]
            assert (first.num_rows + rest[0], rest[1], rest[2]) == (20_000, first.num_rows, 19_999)
            assert scanner.positions() == {0: 20_000}


def test_to_arrow_needs_a_subscription(conn: lakelog.Connection) -> None:
    table = create_table(conn)
    with table.new_scan().create_log_scanner() as scanner:
        with pytest.raises(lakelog.InvalidRequestError, match="subscribe_from_beginning"):
            scanner.to_arrow()


def test_append_arrow_takes_every_arrow_shape(conn: lakelog.Connection) -> None:
    source = create_table(conn, "source")
    produce_orders(source, 0, 10)
    target = create_table(conn, "target")
    with target.new_append().create_writer() as writer:
        writer.append_arrow(pa.Table.from_batches([order_rows(0, 10)]).select(["amount", "id", "name"]))  # any column order
        writer.append_arrow(pa.RecordBatchReader.from_batches(ORDERS_SCHEMA, [order_rows(10, 5), order_rows(15, 5)]))
        writer.append_arrow(pd.DataFrame({"id": [20, 21], "name": ["n20", "n21"], "amount": [10.0, 10.5]}, index=[7, 8]))
        writer.append_arrow(pl.DataFrame({"id": [22], "name": ["n22"], "amount": [11.0]}))
        writer.append_arrow(duckdb.sql("select 23::bigint as id, 'n23' as name, 11.5::double as amount"))
        with source.new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            copied = scanner.poll(timeout_ms=5000)
            writer.append_arrow(copied)  # ScanRecords of another table: the __ columns are dropped
        writer.append_arrow(pd.DataFrame({"id": pd.Series([], dtype="int64"), "name": [], "amount": []}))
    with target.new_scan().create_log_scanner() as scanner:
        scanner.subscribe_from_beginning()
        rows = scanner.to_arrow()
    assert sorted_rows(rows) == sorted(expected_rows(0, 24) + sorted_rows(copied.to_arrow()), key=lambda row: row["id"])
    assert rows.num_rows == 24 + len(copied) == 34


def test_append_arrow_names_the_column_at_fault(conn: lakelog.Connection) -> None:
    table = create_table(conn)
    writer = table.new_append().create_writer()
    with pytest.raises(lakelog.SchemaMismatchError, match=r"column 'amount' of type string does not fit double") as info:
        writer.append_arrow(pd.DataFrame({"id": [1], "name": ["a"], "amount": ["lots"]}))
    assert "\n" not in str(info.value)
    with pytest.raises(lakelog.SchemaMismatchError, match=r"column 'id' of type double does not fit int64"):
        writer.append_arrow(pl.DataFrame({"id": [2.5], "name": ["a"], "amount": [1.0]}))
    strict = create_table(conn, "strict", pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())]))
    with pytest.raises(lakelog.SchemaMismatchError, match=r"missing, and the table requires \(not null\): \['id'\]"):
        strict.new_append().create_writer().append_arrow(pa.table({"name": ["a"]}))
    with pytest.raises(lakelog.SchemaMismatchError, match=r"not in the table: \['colour'\]"):
        writer.append_arrow(pa.table({"id": [1], "name": ["a"], "amount": [1.0], "colour": ["red"]}))
    with pytest.raises(lakelog.SchemaMismatchError, match="append_arrow takes a pyarrow Table.*not builtins.list"):
        writer.append_arrow([{"id": 1, "name": "a", "amount": 1.0}])
    writer.append_arrow(pl.DataFrame({"id": [3.0], "name": ["whole"], "amount": [1]}))  # exact casts are fine
    writer.append_arrow(pa.table({"id": [4], "name": ["no amount"]}))  # a nullable column left out is null, as in PyIceberg
    writer.close()
    assert conn.admin.list_offsets(table.path) == {0: 2}, "nothing of a refused input was written"
    with table.new_scan().create_log_scanner() as scanner:
        scanner.subscribe_from_beginning()
        assert scanner.to_arrow().select(["id", "amount"]).to_pylist() == [{"id": 3, "amount": 1.0}, {"id": 4, "amount": None}]
