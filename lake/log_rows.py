"""Lake rows -> log rows: the inverse of :func:`lakelog.lake.schema_mapping.to_lake_rows`.

A LogSource hands the scanner exactly what the log would have: the table's own Arrow types (the
lake widened some, e.g. int8 to int, timestamp[ms] to timestamp[us]) and ``__timestamp`` as int64
milliseconds again (the lake holds it as timestamptz microseconds).
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.record.meta_columns import RESERVED_COLUMNS, TIMESTAMP_COLUMN


def file_columns(names: Sequence[str], log_schema: pa.Schema) -> list[str]:
    """The columns of ``log_schema`` that a data file whose columns are ``names`` holds: one written
    before a column was added lacks it."""
    held = set(names)
    return [name for name in log_schema.names if name in held]


def to_log_rows(lake_rows: pa.RecordBatch, log_schema: pa.Schema) -> pa.RecordBatch:
    """The columns of ``log_schema`` (projected columns plus the meta columns) out of a batch of
    lake rows; a table column the rows lack (added after they were tiered) reads null. Raises
    ArrowException (or KeyError for a missing meta column) when a value does not fit."""
    index_of = {name: index for index, name in enumerate(lake_rows.schema.names)}  # looked up once, not per field
    columns = []
    for field in log_schema:
        index = index_of.get(field.name)
        if index is None:
            if field.name in RESERVED_COLUMNS:
                raise KeyError(field.name)
            columns.append(pa.nulls(lake_rows.num_rows, field.type))
            continue
        column = lake_rows.column(index)
        if field.name == TIMESTAMP_COLUMN:
            column = pc.divide(column.cast(pa.int64()), 1000)
        if column.type != field.type:  # most already have it: with many small files, each call counts
            column = column.cast(field.type)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=log_schema)
