"""Arrow types -> Iceberg types of the lake table: what maps, what is refused (at create time, before
the lakelog table exists), and a round trip of every supported type through the log, a tiering
round and PyIceberg."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any, Callable

import pyarrow as pa
import pytest

import lakelog
from lakelog.lake.schema_mapping import lake_schema
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.conftest import LAKE_TABLE, create_table, lake_table

SUPPORTED: list[tuple[pa.DataType, str, list[Any]]] = [
    (pa.bool_(), "boolean", [True, None]),
    (pa.int8(), "int", [-128, 127]),
    (pa.int16(), "int", [-32768, None]),
    (pa.int32(), "int", [2**31 - 1, -(2**31)]),
    (pa.int64(), "long", [2**63 - 1, -(2**63)]),
    (pa.uint8(), "int", [255, 0]),
    (pa.uint16(), "int", [65535, None]),
    (pa.uint32(), "long", [2**32 - 1, 0]),
    (pa.float16(), "float", [1.5, None]),
    (pa.float32(), "float", [0.25, -1.0]),
    (pa.float64(), "double", [1e300, None]),
    (pa.string(), "string", ["héllo", None]),
    (pa.large_string(), "string", ["x" * 1000, ""]),
    (pa.binary(), "binary", [b"\x00\xff", None]),
    (pa.large_binary(), "binary", [b"big", b""]),
    (pa.binary(3), "fixed[3]", [b"abc", None]),
    (pa.date32(), "date", [datetime.date(2024, 2, 29), None]),
    (pa.date64(), "date", [datetime.date(1969, 12, 31), datetime.date(2038, 1, 19)]),
    (pa.timestamp("s"), "timestamp", [datetime.datetime(2024, 1, 1, 12), None]),
    (pa.timestamp("ms"), "timestamp", [datetime.datetime(2024, 1, 1, 12, 0, 0, 123000), None]),
    (pa.timestamp("us"), "timestamp", [datetime.datetime(2024, 1, 1, 12, 0, 0, 123456), None]),
    (pa.timestamp("us", tz="UTC"), "timestamptz", [datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc), None]),
    (
        pa.timestamp("ms", tz="Asia/Kolkata"),
        "timestamptz",
        [datetime.datetime(2024, 6, 1, 5, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=5, minutes=30))), None],
    ),
    (pa.time32("s"), "time", [datetime.time(23, 59, 59), None]),
    (pa.time32("ms"), "time", [datetime.time(1, 2, 3, 4000), None]),
    (pa.time64("us"), "time", [datetime.time(1, 2, 3, 456789), None]),
    (pa.decimal128(38, 10), "decimal(38, 10)", [Decimal("1234567890123456789012345678.0123456789"), None]),
    (pa.decimal128(5, 2), "decimal(5, 2)", [Decimal("-999.99"), Decimal("0.01")]),
    (pa.dictionary(pa.int8(), pa.string()), "string", ["red", "red"]),
    (pa.list_(pa.int32()), "list<int>", [[1, None, 3], None]),
    (pa.large_list(pa.string()), "list<string>", [["a"], []]),
    (pa.list_(pa.float64(), 2), "list<double>", [[1.0, 2.0], None]),
    (pa.struct([("x", pa.int32()), ("y", pa.string())]), "struct<", [{"x": 1, "y": "a"}, None]),
    (pa.map_(pa.string(), pa.int64()), "map<string, long>", [[("k", 1)], None]),
]

REFUSED: list[tuple[pa.DataType, str]] = [
    (pa.uint64(), "values above 2^63-1 do not fit"),
    (pa.timestamp("ns"), "Iceberg timestamps hold microseconds"),
    (pa.time64("ns"), "Iceberg times hold microseconds"),
    (pa.decimal256(40, 2), "at most 38 digits"),
    (pa.duration("s"), "Iceberg has no such type"),
    (pa.null(), "Iceberg has no such type"),
    (pa.list_(pa.uint64()), "values above 2^63-1"),
    (pa.struct([("inner", pa.timestamp("ns"))]), "field 'inner' of type timestamp[ns]"),
]


def _columns() -> pa.Schema:
    return pa.schema([pa.field(f"c{i}", data_type) for i, (data_type, _, _) in enumerate(SUPPORTED)])


def test_each_supported_type_maps_to_its_iceberg_type() -> None:
    schema = lake_schema(_columns())
    for i, (data_type, iceberg, _) in enumerate(SUPPORTED):
        assert str(schema.find_field(f"c{i}").field_type).startswith(iceberg), data_type
    assert [(f.name, str(f.field_type), f.required) for f in schema.fields[-3:]] == [
        ("__bucket", "int", True),
        ("__offset", "long", True),
        ("__timestamp", "timestamptz", True),
    ]


@pytest.mark.parametrize("data_type, reason", REFUSED, ids=[str(t) for t, _ in REFUSED])
def test_unsupported_type_is_refused_before_the_table_exists(
    server: ServerProcess, conn: lakelog.Connection, data_type: pa.DataType, reason: str
) -> None:
    schema = pa.schema([("id", pa.int64()), ("bad", data_type)])
    with pytest.raises(lakelog.InvalidTableError) as refused:
        create_table(conn, schema=schema, properties=LAKE_TABLE)
    assert f"column 'bad' of type {data_type}" in str(refused.value)
    assert reason in str(refused.value)
    assert conn.admin.list_tables("shop") == []
    create_table(conn, schema=schema)  # without the lake the same schema is fine


def test_every_supported_type_round_trips_through_the_lake(spark: Any, server_factory: Callable[..., ServerProcess]) -> None:
    schema = _columns()
    rows = pa.table([pa.array(values, data_type) for data_type, _, values in SUPPORTED], schema=schema)
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, schema=schema, properties=LAKE_TABLE)
        writer = table.new_append().create_writer()
        writer.append_arrow(rows.to_batches()[0])
        writer.flush()
        with TieringJob(TieringOptions(server.address), spark=spark) as job:
            assert job.run_round().records == rows.num_rows

    lake = lake_table(server, table.path).scan().to_arrow().sort_by("__offset")
    assert lake.column("__offset").to_pylist() == list(range(rows.num_rows))
    for i, (data_type, _, values) in enumerate(SUPPORTED):
        assert lake.column(f"c{i}").to_pylist() == values, data_type
