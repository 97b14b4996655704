"""How a table's schema may change, and how a batch written under an older schema reads in the newest.

A table's history spans three tiers written years apart, so a change must never make an older
batch unreadable. Only the changes Iceberg can follow without rewriting files are allowed: a
nullable column added last, and a column widened along Iceberg's promotions (int8 -> int16 ->
int32 -> int64, float32 -> float64). Both keep every older schema a prefix of the newer one, by
name and position, with types the newer one can hold, so a batch reads in the current schema by
name alone: columns it lacks read null, narrower ones are cast. No schema registry is consulted to
read: a batch's own Arrow schema says what it holds.
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from lakelog.errors import InvalidAlterTableError, SchemaMismatchError
from lakelog.metadata import TableChange, TableInfo

# The promotions Iceberg allows, as Arrow types: each type and the wider ones it may become.
_WIDER: dict[pa.DataType, tuple[pa.DataType, ...]] = {
    pa.int8(): (pa.int16(), pa.int32(), pa.int64()),
    pa.int16(): (pa.int32(), pa.int64()),
    pa.int32(): (pa.int64(),),
    pa.float32(): (pa.float64(),),
}


def can_widen(old: pa.DataType, new: pa.DataType) -> bool:
    return new in _WIDER.get(old, ())


def apply_changes(info: TableInfo, changes: Sequence[TableChange]) -> pa.Schema:
    """``info``'s schema with ``changes`` applied in order; raises :class:`InvalidAlterTableError`
    naming the column for anything else, so nothing changes unless all of them can."""
    if not changes:
        raise InvalidAlterTableError(f"altering {info.path}: no change given")
    schema = info.schema
    keys = {*info.bucket_keys, *info.partition_keys}
    for change in changes:
        where = f"altering {info.path}: column {change.name!r}"
        if change.kind == TableChange.ADD_COLUMN:
            if change.name in schema.names or change.name.startswith("__"):
                taken = "is a column already" if change.name in schema.names else "starts with __, kept for lakelog's own columns"
                raise InvalidAlterTableError(f"{where} {taken}")
            schema = schema.append(pa.field(change.name, change.type, nullable=True, metadata=_comment(change.comment)))
        elif change.kind == TableChange.WIDEN_COLUMN:
            index = schema.get_field_index(change.name)
            if index < 0:
                raise InvalidAlterTableError(f"{where} does not exist (columns: {', '.join(schema.names)})")
            if change.name in keys:
                kind = "partition" if change.name in info.partition_keys else "bucket"
                raise InvalidAlterTableError(f"{where} is a {kind} key: its type decides where rows go, so it cannot change")
            old = schema.field(index)
            if not can_widen(old.type, change.type):
                allowed = ", ".join(str(t) for t in _WIDER.get(old.type, ())) or "none"
                raise InvalidAlterTableError(f"{where} is {old.type} and cannot become {change.type} (it may become: {allowed})")
            schema = schema.set(index, old.with_type(change.type))
        else:
            raise InvalidAlterTableError(f"{where}: unknown change {change.kind!r}")
    return schema


def _comment(comment: str) -> dict[bytes, bytes] | None:
    return {b"comment": comment.encode()} if comment else None


def check_readable(batch_schema: pa.Schema, current: pa.Schema, where: str) -> None:
    """Refuse a batch whose schema is not one of the table's versions in shape: a prefix of the
    current columns by name, each of the current type or one it widens from."""
    names = current.names[: len(batch_schema)]
    if len(batch_schema) > len(current) or batch_schema.names != names or any(
        field.type != current.field(field.name).type and not can_widen(field.type, current.field(field.name).type)
        for field in batch_schema
    ):
        raise SchemaMismatchError(f"{where}: batch schema {batch_schema} is not a version of the table's schema {current}")


def conform(batch: pa.RecordBatch, schema: pa.Schema, where: str) -> pa.RecordBatch:
    """``batch`` in ``schema``, by column name: a column it lacks is null, a narrower one is cast
    (a copy of that column only), one already in ``schema``'s type is kept as it is; a column of
    another type is a :class:`SchemaMismatchError`."""
    columns = []
    for field in schema:
        index = batch.schema.get_field_index(field.name)
        if index < 0:
            columns.append(pa.nulls(batch.num_rows, field.type))
            continue
        column = batch.column(index)
        if column.type != field.type and not can_widen(column.type, field.type):
            raise SchemaMismatchError(f"{where}: column {field.name!r} is {column.type} in a batch, {field.type} in the table")
        columns.append(column if column.type == field.type else column.cast(field.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
