"""What a poll returns: records per bucket, as rows or as one Arrow table."""

from __future__ import annotations

import itertools
from typing import Any, Iterator, NamedTuple, Union

import pyarrow as pa

from lakelog.record.meta_columns import OFFSET_COLUMN, RESERVED_COLUMNS, TIMESTAMP_COLUMN

APPEND_ONLY = "+A"


class ScanRecord(NamedTuple):
    """One record as a poll returns it; a named tuple (like kafka-python's ConsumerRecord) because a
    poll builds one per row, and a tuple is the cheapest Python object to build."""

    bucket: int
    offset: int
    timestamp: int
    change_type: str
    row: dict[str, Any]
    partition_id: int | None = None  # the record's partition, for a partitioned table


BucketKey = Union[int, tuple[int, int]]


class ScanRecords:
    """Records of one poll; per bucket in offset order. ``high_watermark(bucket)`` is what the
    server reported, so a consumer can tell how far behind it is. For a partitioned table buckets
    are keyed ``(partition_id, bucket)``."""

    def __init__(self, schema: pa.Schema, tables: dict[BucketKey, pa.Table], high_watermarks: dict[BucketKey, int]) -> None:
        self._schema = schema
        self._tables = {bucket: table for bucket, table in sorted(tables.items()) if table.num_rows}
        self._high_watermarks = dict(high_watermarks)

    def __len__(self) -> int:
        return sum(table.num_rows for table in self._tables.values())

    def __bool__(self) -> bool:
        return bool(self._tables)

    def buckets(self) -> list[int]:
        return list(self._tables)

    def high_watermark(self, bucket: int) -> int:
        return self._high_watermarks.get(bucket, -1)

    @property
    def high_watermarks(self) -> dict[int, int]:
        return dict(self._high_watermarks)

    def records(self, bucket: int) -> list[ScanRecord]:
        table = self._tables.get(bucket)
        return list(_rows(table, bucket)) if table is not None else []

    def __iter__(self) -> Iterator[ScanRecord]:
        for bucket, table in self._tables.items():
            yield from _rows(table, bucket)

    def to_arrow(self, bucket: int | None = None) -> pa.Table:
        """The records (of ``bucket`` only, when given) as one table."""
        tables = list(self._tables.values()) if bucket is None else [self._tables[bucket]] if bucket in self._tables else []
        return pa.concat_tables(tables) if tables else self._schema.empty_table()

    def to_pandas(self) -> Any:
        """The records as a pandas DataFrame (needs pandas), with ``__bucket``, ``__offset``, ``__timestamp``."""
        return self.to_arrow().to_pandas()

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow PyCapsule stream: ``pa.table(records)``, ``polars.DataFrame(records)`` and
        ``duckdb.sql("from records")`` read a poll's records without a copy through Python rows."""
        return self.to_arrow().__arrow_c_stream__(requested_schema)


def _rows(table: pa.Table, bucket: BucketKey) -> Iterator[ScanRecord]:
    """Rows built column-wise by Arrow: the table's own columns as dicts, the offsets and
    timestamps as plain lists, zipped into records without a Python step per record (``tuple.__new__``
    over ``zip`` runs in C; calling the named tuple's own ``__new__`` is a Python frame per record)."""
    rows = table.select([name for name in table.column_names if name not in RESERVED_COLUMNS]).to_pylist()
    offsets = table.column(OFFSET_COLUMN).to_pylist()
    timestamps = table.column(TIMESTAMP_COLUMN).to_pylist()
    partition_id, bucket = bucket if isinstance(bucket, tuple) else (None, bucket)
    fields = zip(
        itertools.repeat(bucket), offsets, timestamps, itertools.repeat(APPEND_ONLY), rows, itertools.repeat(partition_id)
    )
    return map(tuple.__new__, itertools.repeat(ScanRecord), fields)
