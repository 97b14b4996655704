"""Arrow types of a log table -> Iceberg types of its lake table, and log rows -> lake rows.

Only lossless mappings are accepted: a column whose values Iceberg (format v2, which is what
PyIceberg writes) cannot hold exactly is refused when the table is created, naming the column and
its type, so no tiering round can ever fail or silently truncate on it later.
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
)

from lakelog.errors import InvalidTableError
from lakelog.record.meta_columns import BUCKET_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN

MAX_DECIMAL_PRECISION = 38

_SIMPLE: list[tuple[Callable[[pa.DataType], bool], Callable[[], IcebergType]]] = [
    (pa.types.is_boolean, BooleanType),
    (lambda t: t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()), IntegerType),
    (lambda t: t in (pa.int64(), pa.uint32()), LongType),
    (lambda t: t in (pa.float16(), pa.float32()), FloatType),
    (pa.types.is_float64, DoubleType),
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t), StringType),
    (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t), BinaryType),
    (lambda t: pa.types.is_date32(t) or pa.types.is_date64(t), DateType),
]


class _Refused(Exception):
    """Why one (possibly nested) type has no lossless Iceberg counterpart."""


def _to_iceberg(data_type: pa.DataType, ids: Iterator[int]) -> IcebergType:
    for matches, iceberg in _SIMPLE:
        if matches(data_type):
            return iceberg()
    if pa.types.is_dictionary(data_type):
        return _to_iceberg(data_type.value_type, ids)
    if pa.types.is_timestamp(data_type):
        if data_type.unit == "ns":
            raise _Refused("Iceberg timestamps hold microseconds; use timestamp[us] (or ms, s)")
        return TimestamptzType() if data_type.tz else TimestampType()
    if pa.types.is_time(data_type):
        if data_type.unit == "ns":
            raise _Refused("Iceberg times hold microseconds; use time64[us] (or time32)")
        return TimeType()
    if pa.types.is_decimal(data_type):
        if data_type.precision > MAX_DECIMAL_PRECISION:
            raise _Refused(f"Iceberg decimals hold at most {MAX_DECIMAL_PRECISION} digits")
        return DecimalType(data_type.precision, data_type.scale)
    if pa.types.is_fixed_size_binary(data_type):
        return FixedType(data_type.byte_width)
    if pa.types.is_uint64(data_type):
        raise _Refused("values above 2^63-1 do not fit Iceberg's long; use int64")
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        element = data_type.value_field
        return ListType(next(ids), _to_iceberg(element.type, ids), element_required=not element.nullable)
    if pa.types.is_map(data_type):
        key_id, value_id = next(ids), next(ids)
        return MapType(
            key_id,
            _to_iceberg(data_type.key_type, ids),
            value_id,
            _to_iceberg(data_type.item_type, ids),
            value_required=not data_type.item_field.nullable,
        )
    if pa.types.is_struct(data_type):
        return StructType(*(_field(child, ids, nested=True) for child in data_type))
    raise _Refused("Iceberg has no such type")


def _field(item: pa.Field, ids: Iterator[int], nested: bool = False) -> NestedField:
    field_id = next(ids)
    try:
        field_type = _to_iceberg(item.type, ids)
    except _Refused as refused:
        raise (_Refused(f"field {item.name!r} of type {item.type}: {refused}") if nested else refused) from None
    return NestedField(field_id, item.name, field_type, required=not item.nullable)


def lake_schema(log_schema: pa.Schema, table: str = "") -> Schema:
    """The lake table's Iceberg schema: the log table's columns, then ``__bucket`` int,
    ``__offset`` long and ``__timestamp`` timestamptz.

    Raises :class:`InvalidTableError` naming the first column (and its type) that has no lossless
    Iceberg type.
    """
    ids = itertools.count(1)
    fields = []
    for column in log_schema:
        try:
            fields.append(_field(column, ids))
        except _Refused as refused:
            where = f"table {table}: " if table else ""
            raise InvalidTableError(
                f"{where}column {column.name!r} of type {column.type} cannot be stored in the Iceberg lake: {refused}"
            ) from None
    fields += [
        NestedField(next(ids), BUCKET_COLUMN, IntegerType(), required=True),
        NestedField(next(ids), OFFSET_COLUMN, LongType(), required=True),
        NestedField(next(ids), TIMESTAMP_COLUMN, TimestamptzType(), required=True),
    ]
    return Schema(*fields)


def to_lake_rows(log_rows: pa.Table, target: pa.Schema) -> pa.Table:
    """Log rows in their columnar form (the table's columns plus ``__bucket``, ``__offset`` and
    ``__timestamp`` as int64 milliseconds) -> rows of the lake table's Arrow schema ``target``.

    ``target`` is the lake table's own schema as PyIceberg renders it (with Parquet field ids), so the
    files written from these rows need no name mapping to be read.
    """
    millis = log_rows.column(TIMESTAMP_COLUMN)
    micros = pc.multiply(millis.cast(pa.int64()), 1000).cast(pa.timestamp("us", tz="UTC"))
    rows = log_rows.set_column(log_rows.schema.get_field_index(TIMESTAMP_COLUMN), TIMESTAMP_COLUMN, micros)
    return rows.select(target.names).cast(target)


def in_current_schema(lake_rows: pa.Table, target: pa.Schema) -> pa.Table:
    """Rows read back from a lake data file, in the lake table's current Arrow schema ``target``
    (Parquet field ids included, so a rewritten file needs no name mapping either): columns are
    matched by name and cast, and one the file lacks reads null."""
    columns = [
        lake_rows.column(field.name).cast(field.type) if field.name in lake_rows.column_names else pa.nulls(lake_rows.num_rows, field.type)
        for field in target
    ]
    return pa.Table.from_arrays(columns, schema=target)
