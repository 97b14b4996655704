"""Arrow types -> Iceberg types of the lake table: what maps, what is refused (at create time, before
the lakelog table exists), and a round trip of every supported type through the log, a tiering
round and PyIceberg."""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa
import pytest

import lakelog
from lakelog.lake.schema_mapping import lake_schema
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.harness.lake_tier import LAKE_TABLE, lake_table
from tests.harness.lake_types import SUPPORTED
from tests.harness.tables import create_table


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
