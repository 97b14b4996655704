"""``spark.read.format("lakelog")``: a lakelog table's whole history (lake, remote and local
tiers) as a DataFrame, through PySpark's Python data source API. Options: README, "Reading from
Spark", and :mod:`lakelog.spark.read_options`.

``schema()`` and ``partitions()`` run on the driver (in a Python worker Spark starts there); the
partitions fix each bucket's range (:mod:`lakelog.spark.read_plan`). ``read()`` runs in a task:
it connects on its own, reads its range through a LogScanner, which serves each offset from
whichever tier holds it, and yields each poll as Arrow record batches, so a task holds one poll's
records at a time, never a whole bucket.

A partitioned table reads every partition's buckets (a lake-only partition's from the lake) with
``__partition_id`` after the other meta columns, as the scanner's columnar form has it; filters on
the partition key columns and on ``__partition_id`` choose the partitions read.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, Filter, InputPartition
from pyspark.sql.types import StructType

from lakelog.client.connection import connect
from lakelog.client.scanner.offset_range import read_offset_range
from lakelog.record.meta_columns import PARTITION_ID_COLUMN, RESERVED_COLUMNS
from lakelog.errors import InvalidConfigError
from lakelog.metadata import TableInfo
from lakelog.log_ranges import BucketRange
from lakelog.spark.read_plan import plan_ranges
from lakelog.spark.pushed_filters import PushedFilters
from lakelog.spark.read_options import COLUMNS, ReadOptions, parse_read_options
from lakelog.spark.spark_schema import spark_arrow_schema, spark_schema
from lakelog.spark_runtime.worker_heap import freeze_worker_heap

FORMAT_NAME = "lakelog"


def _projected(info: TableInfo, names: list[str] | tuple[str, ...], where: str) -> pa.Schema:
    """The table's columns among ``names``, in that order; a name that is neither a column nor a
    metadata column is refused, naming ``where`` it came from."""
    meta = RESERVED_COLUMNS if info.partitioned else tuple(c for c in RESERVED_COLUMNS if c != PARTITION_ID_COLUMN)
    unknown = [name for name in names if name not in meta and info.schema.get_field_index(name) < 0]
    if unknown:
        raise InvalidConfigError(f"{where} names column {unknown[0]!r}, but {info.path} has columns {info.schema.names}")
    return pa.schema([info.schema.field(name) for name in names if name not in meta])


class LakelogDataSource(DataSource):
    """Register once per session: ``spark.dataSource.register(LakelogDataSource)`` (or
    :func:`lakelog.spark.register`)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        """The table's columns (or those of the ``columns`` option), then ``__bucket``,
        ``__offset``, ``__timestamp`` and, for a partitioned table, ``__partition_id``."""
        options = parse_read_options(self.options, streaming=None)
        with connect(options.bootstrap, options.client_config) as conn:
            info = conn.admin.get_table_info(options.path)
        columns = _projected(info, options.columns, f"lakelog Spark option {COLUMNS!r}") if options.columns else info.schema
        return spark_schema(columns, info.partitioned)

    def reader(self, schema: StructType) -> "LakelogReader":
        return FilteringLakelogReader(parse_read_options(self.options), schema)

    def streamReader(self, schema: StructType) -> "DataSourceStreamReader":
        """``spark.readStream.format("lakelog")`` (:mod:`lakelog.spark.lakelog_stream_reader`)."""
        from lakelog.spark.lakelog_stream_reader import LakelogStreamReader

        options = parse_read_options(self.options, streaming=True)
        return LakelogStreamReader(options, LakelogReader(options, schema))


class FoundLakelogDataSource(LakelogDataSource):
    """The source Spark finds by itself (module ``pyspark_lakelog``), with no :func:`register` call:
    it takes no filters, since Spark refuses a source that does while
    ``spark.sql.python.filterPushdown.enabled`` is off, and nothing here could turn it on."""

    def reader(self, schema: StructType) -> "LakelogReader":
        return LakelogReader(parse_read_options(self.options), schema)


class LakelogReader(DataSourceReader):
    """Pickled from the driver to every task; holds only the options and the schema to produce."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        """``schema`` is the DataFrame's: the data source's own, or one a user gave with
        ``.schema(...)``, whose column names then choose the columns read."""
        self._options = options
        self._names = schema.names
        self._columns = [name for name in schema.names if name not in RESERVED_COLUMNS]
        self._arrow_schema = spark_arrow_schema(schema)
        self._pushed = PushedFilters.none()

    def partitions(self) -> list[InputPartition]:
        """One partition per piece of a bucket's range (an empty list reads nothing: Spark then
        runs one ``InputPartition(None)``). Spark has pickled this reader for its tasks already,
        so nothing learnt here reaches them but the partitions."""
        options = self._options
        with connect(options.bootstrap, options.client_config) as conn:
            info = conn.admin.get_table_info(options.path)
            _projected(info, self._names, "the DataFrame schema")
            ranges = plan_ranges(conn, info, options.start, options.end, options.max_records_per_partition, self._pushed)
        return [InputPartition(piece) for piece in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        freeze_worker_heap()
        piece: BucketRange | None = partition.value
        if piece is None:
            return
        options = self._options
        with connect(options.bootstrap, options.client_config) as conn:
            scan = conn.get_table(options.path).new_scan()
            with (scan.project(self._columns) if self._columns else scan).create_log_scanner() as scanner:
                for polled in read_offset_range(scanner, options.path, piece.bucket, piece.start, piece.end, piece.partition_id):
                    yield from polled.select(self._names).cast(self._arrow_schema).to_batches()


class FilteringLakelogReader(LakelogReader):
    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Filters on ``__bucket``, ``__offset``, ``__timestamp`` and ``__partition_id`` narrow the
        ranges read, those on partition key columns choose partitions, those on bucket keys buckets
        (:mod:`lakelog.spark.pushed_filters`); the others are left to Spark."""
        if any(getattr(item, "attribute", ("",))[0] not in RESERVED_COLUMNS for item in filters):
            options = self._options
            with connect(options.bootstrap, options.client_config) as conn:
                self._pushed = PushedFilters.for_table(conn.admin.get_table_info(options.path))
        return list(self._pushed.push(filters))
