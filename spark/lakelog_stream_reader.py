"""``spark.readStream.format("lakelog")``: a table as an unbounded stream of micro-batches.

An offset of the stream is ``{"<bucket>": next offset}`` for every bucket of the table (JSON in
Spark's checkpoint). Spark writes a batch's end to its offset log before the batch runs and replays
exactly that ``[start, end)`` after a restart; every batch's partitions are fixed by its two offsets
alone (the same pieces as a batch read, :func:`lakelog.spark.bucket_ranges.split_ranges`), so a
replay reads the very same records and a checkpointed query with an idempotent sink (files,
``foreachBatch`` keyed by batch id) sees every offset exactly once.

Tasks read through a LogScanner like the batch reader, so a stream that starts before what the
servers still hold (``startingOffsets=earliest`` on a lake table) reads it from the lake, then from
remote segments, then from local disk, with no seam. Options: those of ``spark.read`` but the
``ending*`` ones, ``startingOffsets`` defaulting to ``latest`` (as Kafka's), and
``maxOffsetsPerTrigger``, at most that many records per micro-batch (spread over the buckets).
``Trigger.AvailableNow`` reads up to the high watermarks seen when the query starts.
"""

from __future__ import annotations

from typing import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from lakelog.client.connection import connect
from lakelog.metadata import OffsetSpec
from lakelog.spark.bucket_ranges import resolve_bound, split_ranges
from lakelog.spark.lakelog_data_source import LakelogReader
from lakelog.spark.read_options import ReadOptions
from lakelog.tiering.split_planner import bucket_ranges

Offsets = dict[str, int]


def _to_buckets(offsets: Mapping[str, int]) -> dict[int, int]:
    return {int(bucket): int(offset) for bucket, offset in offsets.items()}


def _to_offsets(per_bucket: Mapping[int, int]) -> Offsets:
    return {str(bucket): offset for bucket, offset in sorted(per_bucket.items())}


class LakelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Runs on the driver (offsets, partitions) and, pickled, in every task (``read``)."""

    def __init__(self, options: ReadOptions, reader: LakelogReader) -> None:
        """``reader`` is the batch reader of the same options and schema: it reads each piece."""
        self._options = options
        self._reader = reader
        self._target: dict[int, int] | None = None  # Trigger.AvailableNow: never past this

    def initialOffset(self) -> Offsets:
        """Where a new query starts (``startingOffsets`` / ``startingTimestamp``); a restarted one
        starts from its checkpoint instead."""
        options = self._options
        with connect(options.bootstrap, options.client_config) as conn:
            info = conn.admin.get_table_info(options.path)
            return _to_offsets(resolve_bound(conn.admin, info, options.start))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self._options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._high_watermarks()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        """The high watermarks (or the AvailableNow target), at most ``limit`` records past
        ``start`` in all, shared fairly between the buckets."""
        latest = self._target if self._target is not None else self._high_watermarks()
        begin = _to_buckets(start)
        ends = {bucket: max(offset, begin.get(bucket, 0)) for bucket, offset in latest.items()}
        starts = {bucket: begin.get(bucket, 0) for bucket in ends}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        taken = bucket_ranges(starts, ends, max_rows).ranges
        return _to_offsets({bucket: taken.get(bucket, (0, starts[bucket]))[1] for bucket in ends})

    def reportLatestOffset(self) -> Offsets:
        return _to_offsets(self._high_watermarks())

    def partitions(self, start: Offsets, end: Offsets) -> list[InputPartition]:
        begin = _to_buckets(start)
        ranges = split_ranges(
            {bucket: begin.get(bucket, 0) for bucket in _to_buckets(end)}, _to_buckets(end), self._options.max_records_per_partition
        )
        return [InputPartition(piece) for piece in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self._reader.read(partition)

    def commit(self, end: Offsets) -> None:
        """Nothing to release: the log keeps every offset whatever a query has consumed."""

    def _high_watermarks(self) -> dict[int, int]:
        options = self._options
        with connect(options.bootstrap, options.client_config) as conn:
            return conn.admin.list_offsets(options.path, spec=OffsetSpec.latest())
