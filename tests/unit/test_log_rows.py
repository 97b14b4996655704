"""Lake rows back to log rows (lake/log_rows.py): the types the log had, nulls for a column added
after the rows were tiered, and a clear failure when a meta column is missing or a value does not fit."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakelog.lake.log_rows import file_columns, to_log_rows
from lakelog.record.meta_columns import with_meta_fields

LOG_SCHEMA = with_meta_fields(pa.schema([("small", pa.int8()), ("name", pa.string()), ("added", pa.float64())]))
UTC_US = pa.timestamp("us", tz="UTC")


def _lake_rows(small: list[int], *, drop: str | None = None) -> pa.RecordBatch:
    """Rows as a tiering round writes them: int8 widened to int32, the commit time as timestamptz
    microseconds, and no ``added`` column (the table gained it later)."""
    columns = {
        "name": pa.array([f"r{i}" for i in range(len(small))]),
        "small": pa.array(small, pa.int32()),
        "__bucket": pa.array([3] * len(small), pa.int32()),
        "__offset": pa.array(range(10, 10 + len(small)), pa.int64()),
        "__timestamp": pa.array([1_700_000_000_123_000 + i * 1000 for i in range(len(small))], UTC_US),
    }
    columns.pop(drop, None)
    return pa.RecordBatch.from_pydict(columns)


def test_lake_rows_come_back_in_the_log_schema_and_order() -> None:
    rows = to_log_rows(_lake_rows([1, -2, 127]), LOG_SCHEMA)

    assert rows.schema == LOG_SCHEMA
    assert rows.to_pydict() == {
        "small": [1, -2, 127],
        "name": ["r0", "r1", "r2"],
        "added": [None, None, None],
        "__bucket": [3, 3, 3],
        "__offset": [10, 11, 12],
        "__timestamp": [1_700_000_000_123, 1_700_000_000_124, 1_700_000_000_125],
    }


def test_a_missing_meta_column_is_a_key_error_naming_it() -> None:
    with pytest.raises(KeyError, match="__offset"):
        to_log_rows(_lake_rows([1], drop="__offset"), LOG_SCHEMA)


def test_a_value_that_does_not_fit_the_logs_type_raises() -> None:
    with pytest.raises(pa.ArrowInvalid):
        to_log_rows(_lake_rows([1, 300]), LOG_SCHEMA)


def test_file_columns_are_the_wanted_ones_a_file_holds_in_log_order() -> None:
    assert file_columns(["__offset", "name", "small", "other"], LOG_SCHEMA) == ["small", "name", "__offset"]
