"""A lakelog table's Arrow schema -> the Spark schema of its DataFrame, and the exact Arrow schema
Spark expects back from a Python data source.

PySpark maps most Arrow types itself (``from_arrow_type``); what Spark has no type for (unsigned
integers, half floats, 64-bit dates, 32-bit times, view types) is first widened to the nearest
Arrow type Spark has, losslessly, so every column of a table can be read.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from lakelog.record.meta_columns import META_FIELDS, PARTITION_ID_FIELD

# The time zone the Python data source reader converts Spark timestamps with (plan_data_source_read).
SPARK_ARROW_TIMEZONE = "UTC"

_WIDENED: dict[pa.DataType, pa.DataType] = {
    pa.uint8(): pa.int16(),
    pa.uint16(): pa.int32(),
    pa.uint32(): pa.int64(),
    pa.uint64(): pa.decimal128(20, 0),
    pa.float16(): pa.float32(),
    pa.date64(): pa.date32(),
    pa.string_view(): pa.string(),
    pa.binary_view(): pa.binary(),
}


def _spark_compatible(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every part Spark has no type for widened to one it has."""
    if data_type in _WIDENED:
        return _WIDENED[data_type]
    if pa.types.is_time32(data_type):
        return pa.time64("us")
    if pa.types.is_dictionary(data_type):
        return _spark_compatible(data_type.value_type)
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        return pa.list_(_compatible_field(data_type.value_field))
    if pa.types.is_map(data_type):
        return pa.map_(_compatible_field(data_type.key_field), _compatible_field(data_type.item_field))
    if pa.types.is_struct(data_type):
        return pa.struct([_compatible_field(child) for child in data_type])
    return data_type


def _compatible_field(item: pa.Field) -> pa.Field:
    return item.with_type(_spark_compatible(item.type))


def spark_schema(columns: pa.Schema, partitioned: bool = False) -> StructType:
    """The DataFrame schema for a table's (projected) ``columns``: those columns, then the scanner's
    ``__bucket`` int, ``__offset`` long, ``__timestamp`` long (ms) and, for a ``partitioned`` table,
    ``__partition_id`` long, exactly as ``poll_arrow`` names them. Naive Arrow timestamps become
    ``timestamp_ntz``, zoned ones ``timestamp``."""
    widened = pa.schema([_compatible_field(item) for item in columns])
    meta = [*META_FIELDS, PARTITION_ID_FIELD] if partitioned else list(META_FIELDS)
    return from_arrow_schema(pa.schema([*widened, *meta]), prefer_timestamp_ntz=True)


def spark_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema a reader's batches must have for ``schema``: Spark checks it batch by batch."""
    return to_arrow_schema(schema, timezone=SPARK_ARROW_TIMEZONE)
