"""What a poll returns: records per bucket, as rows or as one Arrow table."""

from __future__ import annotations

import itertools
from typing import Any, Hashable, Iterator, NamedTuple

import pyarrow as pa

from lakelog.client.table_bucket import TableBucket
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


class ScanRecords:
    """Records of one poll; per bucket in offset order. ``high_watermark(bucket)`` is what the
    server reported, so a consumer can tell how far behind it is. Buckets are keyed as the public
    API keys them (:meth:`TableBucket.public_key`): by number, or, over a partitioned table's
    partitions (``by_partition``), by ``(partition_id, bucket)``."""

    def __init__(
        self, schema: pa.Schema, tables: dict[TableBucket, pa.Table], high_watermarks: dict[TableBucket, int], by_partition: bool = False
    ) -> None:
        self._schema = schema
        self.tables_by_bucket = {bucket: tables[bucket] for bucket in sorted(tables, key=lambda b: b.order) if tables[bucket].num_rows}
        self.high_watermarks_by_bucket = dict(high_watermarks)
        self._tables = {bucket.public_key(by_partition): table for bucket, table in self.tables_by_bucket.items()}
        self._high_watermarks = {bucket.public_key(by_partition): hw for bucket, hw in high_watermarks.items()}
        self._buckets = {bucket.public_key(by_partition): bucket for bucket in self.tables_by_bucket}

    def __len__(self) -> int:
        return sum(table.num_rows for table in self._tables.values())

    def __bool__(self) -> bool:
        return bool(self._tables)

    def buckets(self) -> list[Any]:
        return list(self._tables)

    def high_watermark(self, bucket: Hashable) -> int:
        return self._high_watermarks.get(bucket, -1)

    @property
    def high_watermarks(self) -> dict[Any, int]:
        return dict(self._high_watermarks)

    def records(self, bucket: Hashable) -> list[ScanRecord]:
        table = self._tables.get(bucket)
        return list(_rows(table, self._buckets[bucket])) if table is not None else []

    def __iter__(self) -> Iterator[ScanRecord]:
        for bucket, table in self.tables_by_bucket.items():
            yield from _rows(table, bucket)

    def to_arrow(self, bucket: Hashable | None = None) -> pa.Table:
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


def _rows(table: pa.Table, bucket: TableBucket) -> Iterator[ScanRecord]:
    """Rows built column-wise by Arrow: the table's own columns as dicts, the offsets and
    timestamps as plain lists, zipped into records without a Python step per record (``tuple.__new__``
    over ``zip`` runs in C; calling the named tuple's own ``__new__`` is a Python frame per record)."""
    rows = table.select([name for name in table.column_names if name not in RESERVED_COLUMNS]).to_pylist()
    offsets = table.column(OFFSET_COLUMN).to_pylist()
    timestamps = table.column(TIMESTAMP_COLUMN).to_pylist()
    fields = zip(
        itertools.repeat(bucket.bucket), offsets, timestamps, itertools.repeat(APPEND_ONLY), rows, itertools.repeat(bucket.partition_id)
    )
    return map(tuple.__new__, itertools.repeat(ScanRecord), fields)
