"""The tiering job's Spark task: read one split's log range through the client and write it as one
Parquet data file of the lake table (a split of a partition reads through that partition's handle).

It runs on Spark's Python workers, so it takes everything it needs in :class:`WriterSettings`
(pickled with the task) and reaches the cluster with a client of its own. Reading through
``LogScanner`` serves the range from whichever tier holds it, local or remote (the job's client
config switches the lake off, so a task never reads back what was already tiered).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import load_file_io

from lakelog.client.connection import Connection, connect
from lakelog.client.scanner.offset_range import read_offset_range
from lakelog.errors import LakeError
from lakelog.lake.schema_mapping import to_lake_rows
from lakelog.metadata import LakeBucketKey, lake_bucket_key
from lakelog.record.meta_columns import TIMESTAMP_COLUMN
from lakelog.spark_runtime.worker_heap import freeze_worker_heap
from lakelog.tiering.tiering_split import TieringSplit

ROW_GROUP_ROWS = 128 * 1024
# A column chunk's dictionary is kept while it holds at most this much, then the column is written
# plain. A dictionary pays when values repeat; Arrow's default limit (1 MB) is a whole row group of
# 128k 8-byte values, so every column of distinct values (offsets, ids, timestamps, measurements)
# would be dictionary-encoded, into pages of 17-bit indices zstd cannot shrink: files more than
# twice the size, written with several times the CPU and slower to decode.
DICTIONARY_PAGE_BYTES = 128 * 1024
RESULT_DDL = (
    "table string, bucket int, start_offset long, end_offset long, file_path string,"
    " record_count long, file_size_bytes long, max_timestamp long, partition_id long"
)
RESULT_SCHEMA = pa.schema(
    [
        ("table", pa.string()),
        ("bucket", pa.int32()),
        ("start_offset", pa.int64()),
        ("end_offset", pa.int64()),
        ("file_path", pa.string()),
        ("record_count", pa.int64()),
        ("file_size_bytes", pa.int64()),
        ("max_timestamp", pa.int64()),
        ("partition_id", pa.int64()),
    ]
)


@dataclass(frozen=True)
class WrittenFile:
    """One data file a task wrote: the split it holds, its size and its largest commit timestamp
    (``partition_id`` None: the table has no partitions)."""

    table: str
    bucket: int
    start_offset: int
    end_offset: int
    file_path: str
    record_count: int
    file_size_bytes: int
    max_timestamp: int
    partition_id: int | None = None

    @property
    def key(self) -> LakeBucketKey:
        return lake_bucket_key(self.partition_id, self.bucket)


@dataclass(frozen=True)
class WriterSettings:
    """What a task needs: how to reach the cluster and the lake's storage, and per table (by
    ``DB.TABLE``) the Arrow schema of its lake table, Parquet field ids included."""

    bootstrap: str
    client_config: Mapping[str, Any]
    io_properties: Mapping[str, str]
    lake_schemas: Mapping[str, pa.Schema]


def write_splits(settings: WriterSettings, splits: Sequence[TieringSplit], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A ``mapInArrow`` function: its input rows are indexes into ``splits``; each split becomes a
    file and an output row (:data:`RESULT_SCHEMA`)."""
    freeze_worker_heap()
    with connect(settings.bootstrap, settings.client_config) as conn:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                written = write_split(conn, settings, splits[index])
                yield pa.RecordBatch.from_pylist([asdict(written)], schema=RESULT_SCHEMA)


def write_split(conn: Connection, settings: WriterSettings, split: TieringSplit) -> WrittenFile:
    """Write ``split`` to its file; rows sorted by offset, every offset of the range exactly once."""
    target = settings.lake_schemas[str(split.table)]
    io = load_file_io(dict(settings.io_properties), split.file_path)
    max_timestamp = -1
    try:
        table = conn.get_table(split.table)
        newer = [name for name in table.info.schema.names if name not in target.names]
        if newer:  # altered after the round read the lake table's schema: its columns would be lost here
            raise LakeError(f"{split.table} gained column(s) {', '.join(newer)} during the tiering round; the next round writes them")
        scanner = (table.partition(split.partition_name) if split.partition_id is not None else table).new_scan().create_log_scanner()
        with scanner, io.new_output(split.file_path).create(overwrite=True) as out:
            with lake_file_writer(out, target) as writer:
                for rows in row_groups(read_offset_range(scanner, split.table, split.bucket, split.start_offset, split.end_offset)):
                    max_timestamp = max(max_timestamp, pc.max(rows.column(TIMESTAMP_COLUMN)).as_py())
                    writer.write_table(to_lake_rows(rows, target), row_group_size=ROW_GROUP_ROWS)
            size = out.tell()  # type: ignore[attr-defined]
    except (OSError, pa.ArrowException) as exc:
        raise LakeError(f"cannot write {split.file_path}: {exc}") from exc
    count = split.end_offset - split.start_offset
    return WrittenFile(
        str(split.table),
        split.bucket,
        split.start_offset,
        split.end_offset,
        split.file_path,
        count,
        size,
        max_timestamp,
        split.partition_id,
    )


def lake_file_writer(out: Any, schema: pa.Schema) -> pq.ParquetWriter:
    """The Parquet writer of every lake data file (a tiering round's and a compaction's alike).
    Page checksums: a damaged lake file must fail its read, not decode into other values."""
    return pq.ParquetWriter(out, schema, compression="zstd", write_page_checksum=True, dictionary_pagesize_limit=DICTIONARY_PAGE_BYTES)


def row_groups(tables: Iterable[pa.Table]) -> Iterator[pa.Table]:
    """``tables`` (rows in offset order) gathered into row groups of :data:`ROW_GROUP_ROWS`. A
    split's tables come from :func:`read_offset_range`, which fails the task on a gap or a
    duplicate instead of letting it reach the lake."""
    gathered: list[pa.Table] = []
    gathered_rows = 0
    for table in tables:
        gathered.append(table)
        gathered_rows += table.num_rows
        if gathered_rows >= ROW_GROUP_ROWS:
            yield pa.concat_tables(gathered)
            gathered, gathered_rows = [], 0
    if gathered:
        yield pa.concat_tables(gathered)
