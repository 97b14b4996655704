"""Schema evolution's rules alone: which changes a table takes (a nullable column added last, a
column widened along Iceberg's promotions) and which it refuses naming the column, and how a batch
written under an older schema reads in the newest."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakelog.errors import InvalidAlterTableError, SchemaMismatchError
from lakelog.metadata import TableChange, TableInfo, TablePath
from lakelog.schema_evolution import apply_changes, can_widen, check_readable, conform

V1 = pa.schema([("id", pa.int32()), ("name", pa.string()), ("dt", pa.string())])
PATH = TablePath("shop", "events")


def info(schema: pa.Schema = V1, **keys: tuple[str, ...]) -> TableInfo:
    return TableInfo(1, PATH, schema, 1, 4, {}, **keys)


def test_columns_are_added_nullable_and_last_and_widened_along_icebergs_promotions() -> None:
    schema = apply_changes(
        info(), [TableChange.add_column("amount", pa.float32(), "in euros"), TableChange.widen_column("id", pa.int64())]
    )
    assert schema.names == ["id", "name", "dt", "amount"]
    assert schema.field("id").type == pa.int64() and schema.field("amount").nullable
    assert schema.field("amount").metadata == {b"comment": b"in euros"}
    assert apply_changes(info(schema), [TableChange.widen_column("amount", pa.float64())]).field("amount").type == pa.float64()


@pytest.mark.parametrize(
    ("change", "keys", "message"),
    [
        (TableChange.add_column("name", pa.int64()), {}, "column 'name' is a column already"),
        (TableChange.add_column("__offset", pa.int64()), {}, "starts with __"),
        (TableChange.widen_column("id", pa.int16()), {}, "is int32 and cannot become int16 (it may become: int64)"),
        (TableChange.widen_column("name", pa.large_string()), {}, "is string and cannot become large_string (it may become: none)"),
        (TableChange.widen_column("missing", pa.int64()), {}, "does not exist"),
        (TableChange.widen_column("id", pa.int64()), {"bucket_keys": ("id",)}, "'id' is a bucket key"),
        (TableChange.widen_column("dt", pa.large_string()), {"partition_keys": ("dt",)}, "'dt' is a partition key"),
        (TableChange("drop_column", "name", pa.null()), {}, "unknown change 'drop_column'"),
    ],
)
def test_anything_else_is_refused_naming_the_column(change: TableChange, keys: dict, message: str) -> None:
    with pytest.raises(InvalidAlterTableError, match="altering shop.events: ") as refused:
        apply_changes(info(**keys), [TableChange.add_column("fine", pa.int8()), change])
    assert message in refused.value.message


def test_an_older_batch_reads_in_the_newest_schema_by_name() -> None:
    newest = apply_changes(info(), [TableChange.widen_column("id", pa.int64()), TableChange.add_column("amount", pa.float64())])
    old = pa.record_batch([pa.array([1, 2], pa.int32()), pa.array(["a", "b"]), pa.array(["d", "d"])], schema=V1)
    check_readable(old.schema, newest, "test")
    read = conform(old, newest, "test")
    assert read.schema == newest
    assert read.to_pylist() == [{"id": 1, "name": "a", "dt": "d", "amount": None}, {"id": 2, "name": "b", "dt": "d", "amount": None}]
    # A column already in the newest type is the batch's own buffers, not a copy; a widened one is cast.
    assert [b.address for b in read.column(1).buffers() if b] == [b.address for b in old.column(1).buffers() if b]
    assert read.column(0).buffers()[1].address != old.column(0).buffers()[1].address
    with pytest.raises(SchemaMismatchError, match="not a version of the table's schema"):
        check_readable(pa.schema([("name", pa.string())]), newest, "test")
    with pytest.raises(SchemaMismatchError, match="column 'id' is string in a batch, int64 in the table"):
        conform(pa.record_batch([pa.array(["x"])], names=["id"]), newest, "test")


def test_an_alter_without_changes_is_refused() -> None:
    with pytest.raises(InvalidAlterTableError, match="altering shop.events: no change given"):
        apply_changes(info(), [])


def test_a_refused_change_among_several_refuses_them_all() -> None:
    with pytest.raises(InvalidAlterTableError):
        apply_changes(info(), [TableChange.add_column("amount", pa.float64()), TableChange.widen_column("name", pa.int64())])
    assert info().schema.equals(V1)


@pytest.mark.parametrize(
    ("old", "wider", "narrower_or_other"),
    [
        (pa.int8(), [pa.int16(), pa.int32(), pa.int64()], [pa.int8(), pa.uint8(), pa.float32()]),
        (pa.int16(), [pa.int32(), pa.int64()], [pa.int8(), pa.float64()]),
        (pa.int32(), [pa.int64()], [pa.int16(), pa.float64(), pa.string()]),
        (pa.float32(), [pa.float64()], [pa.float16(), pa.int64()]),
        (pa.string(), [], [pa.large_string(), pa.binary()]),
        (pa.int64(), [], [pa.decimal128(38, 0)]),
    ],
    ids=["int8", "int16", "int32", "float32", "string", "int64"],
)
def test_a_type_widens_only_along_icebergs_promotions(old: pa.DataType, wider: list[pa.DataType], narrower_or_other: list[pa.DataType]) -> None:
    assert all(can_widen(old, new) for new in wider)
    assert not any(can_widen(old, new) for new in narrower_or_other)


def test_a_column_widens_step_by_step_and_every_older_batch_still_reads() -> None:
    v2 = apply_changes(info(pa.schema([("n", pa.int8())])), [TableChange.widen_column("n", pa.int16())])
    v3 = apply_changes(info(v2), [TableChange.widen_column("n", pa.int32()), TableChange.add_column("x", pa.string())])
    for old in (pa.schema([("n", pa.int8())]), v2):
        check_readable(old, v3, "test")
        batch = pa.record_batch([pa.array([-128, 5], old.field("n").type)], schema=old)
        assert conform(batch, v3, "test").to_pylist() == [{"n": -128, "x": None}, {"n": 5, "x": None}]


@pytest.mark.parametrize(
    "batch_schema",
    [
        pa.schema([("name", pa.string()), ("id", pa.int32())]),
        pa.schema([("id", pa.int32()), ("name", pa.string()), ("dt", pa.string()), ("extra", pa.int8())]),
        pa.schema([("id", pa.int64()), ("name", pa.string())]),
        pa.schema([("id", pa.int32()), ("other", pa.string())]),
    ],
    ids=["reordered", "a column the table lacks", "wider than the table", "renamed"],
)
def test_a_batch_whose_schema_is_no_version_of_the_table_s_is_refused(batch_schema: pa.Schema) -> None:
    with pytest.raises(SchemaMismatchError, match="(?s)produce to shop.events bucket 0: batch schema .* is not a version"):
        check_readable(batch_schema, V1, "produce to shop.events bucket 0")


def test_an_empty_older_batch_conforms_to_an_empty_batch_of_the_newest_schema() -> None:
    newest = apply_changes(info(), [TableChange.add_column("amount", pa.float64())])
    read = conform(pa.RecordBatch.from_pylist([], schema=V1), newest, "test")
    assert read.num_rows == 0 and read.schema == newest
