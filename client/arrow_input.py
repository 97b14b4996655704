"""What ``AppendWriter.append_arrow`` accepts, made into an Arrow table of the table's schema.

Users hold data as pyarrow tables and batches, record batch readers, pandas DataFrames, or objects of
other Arrow tools (polars, DuckDB, ...) that export the Arrow PyCapsule stream. All of them are read
here, columns matched by name (order does not matter), each cast to its table type, so a mismatch is
reported with the column at fault instead of a bare ``TypeError`` from deep inside pyarrow.

A column the data lacks is null in every row when the table allows nulls in it, and refused, named,
when it does not: PyIceberg's ``append`` and a Kafka schema's optional fields behave so, and
``lakelog produce`` (a CSV without an optional column) goes through this same function.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakelog.errors import SchemaMismatchError
from lakelog.record.meta_columns import RESERVED_COLUMNS

ACCEPTED = "a pyarrow Table, RecordBatch or RecordBatchReader, a pandas DataFrame, or an object with __arrow_c_stream__"


def arrow_table(data: Any, schema: pa.Schema, label: str) -> pa.Table:
    """``data`` as a table of ``schema``. The ``__bucket``/``__offset``/``__timestamp`` (and
    ``__partition_id``) columns a scan adds are dropped, so what one table's scanner returns can be appended to another table."""
    table = _read(data, label)
    if table.schema.equals(schema, check_metadata=True):  # already the table's: the partitioned writer's split, say
        for schema_field in schema:
            if not schema_field.nullable:
                _column(table, schema_field, label)
        return table
    names = [name for name in table.schema.names if name not in RESERVED_COLUMNS]
    extra = [name for name in names if name not in schema.names]
    required = [field.name for field in schema if not field.nullable and field.name not in names]
    if extra or required:
        raise SchemaMismatchError(
            f"{label}: columns {names} do not match {schema.names}"
            + (f"; not in the table: {extra}" if extra else "")
            + (f"; missing, and the table requires (not null): {required}" if required else "")
        )
    return pa.Table.from_arrays([_column(table, field, label) for field in schema], schema=schema)


def _read(data: Any, label: str) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if _is_pandas(data):
        try:
            return pa.Table.from_pandas(data, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise SchemaMismatchError(f"{label}: the DataFrame does not convert to Arrow: {exc}") from None
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    raise SchemaMismatchError(f"{label}: append_arrow takes {ACCEPTED}, not {type(data).__module__}.{type(data).__qualname__}")


def _is_pandas(data: Any) -> bool:
    """Checked by type name: pandas is optional, and importing it costs a second."""
    return any(cls.__module__.startswith("pandas.") and cls.__name__ == "DataFrame" for cls in type(data).__mro__)


def _column(table: pa.Table, field: pa.Field, label: str) -> pa.ChunkedArray:
    if field.name not in table.schema.names:
        return pa.chunked_array([pa.nulls(table.num_rows, field.type)], field.type)
    column = table.column(field.name)
    if column.type != field.type:
        try:
            column = column.cast(field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            reason = str(exc).splitlines()[0]
            raise SchemaMismatchError(f"{label}: column {field.name!r} of type {column.type} does not fit {field.type}: {reason}") from None
    if not field.nullable and column.null_count:
        raise SchemaMismatchError(f"{label}: column {field.name!r} holds {column.null_count} null value(s) but the table requires it (not null)")
    return column
