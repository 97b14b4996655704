"""``spark.readStream.format("lakelog")``: a table as an unbounded stream of micro-batches.

An offset of the stream is ``{"<bucket>": next offset}`` for every bucket of the table (JSON in
Spark's checkpoint), ``{"<partition_id>:<bucket>": next offset}`` for every bucket of every partition
of a partitioned table (a partition created later is read from its start, a lake-only one from the lake). Spark writes a batch's end to its offset log before the batch runs and replays
exactly that ``[start, end)`` after a restart; every batch's partitions are fixed by its two offsets
alone (the same pieces as a batch read, :func:`lakelog.log_ranges.split_ranges`), so a
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
from lakelog.metadata import LakeBucketKey, OffsetSpec, split_lake_bucket_key
from lakelog.log_ranges import bucket_ranges, split_ranges
from lakelog.spark.read_plan import TableOffsets, resolve_bound
from lakelog.spark.lakelog_data_source import LakelogReader
from lakelog.spark.read_options import ReadOptions

Offsets = dict[str, int]


def _to_keys(offsets: Mapping[str, int]) -> dict[LakeBucketKey, int]:
    """``{"<bucket>": offset}``, or ``{"<partition_id>:<bucket>": offset}`` for a partitioned table
    (as the lake's snapshot summary keys them), by bucket key."""
    keys: dict[LakeBucketKey, int] = {}
    for text, offset in offsets.items():
        partition, sep, bucket = text.rpartition(":")
        keys[(int(partition), int(bucket)) if sep else int(bucket)] = int(offset)
    return keys


def _to_offsets(per_key: Mapping[LakeBucketKey, int]) -> Offsets:
    named = {}
    for key, offset in per_key.items():
        partition_id, bucket = split_lake_bucket_key(key)
        named[str(bucket) if partition_id is None else f"{partition_id}:{bucket}"] = offset
    return dict(sorted(named.items()))


class LakelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Runs on the driver (offsets, partitions) and, pickled, in every task (``read``)."""

    def __init__(self, options: ReadOptions, reader: LakelogReader) -> None:
        """``reader`` is the batch reader of the same options and schema: it reads each piece."""
        self._options = options
        self._reader = reader
        self._target: dict[LakeBucketKey, int] | None = None  # Trigger.AvailableNow: never past this
        # What latestOffset last read: Spark asks reportLatestOffset right after, in the same trigger.
        self._latest: dict[LakeBucketKey, int] | None = None

    def initialOffset(self) -> Offsets:
        """Where a new query starts (``startingOffsets`` / ``startingTimestamp``); a restarted one
        starts from its checkpoint instead."""
        options = self._options
        with connect(options.bootstrap, options.client_config) as conn:
            offsets = TableOffsets(conn, conn.admin.get_table_info(options.path))
            return _to_offsets(resolve_bound(offsets, options.start, offsets.at(OffsetSpec.latest())))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self._options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._high_watermarks()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        """The high watermarks (or the AvailableNow target), at most ``limit`` records past
        ``start`` in all, shared fairly between the buckets. A partition created since ``start``
        is read from offset 0."""
        latest = self._target if self._target is not None else self._high_watermarks()
        self._latest = latest
        begin = _to_keys(start)
        ends = {key: max(offset, begin.get(key, 0)) for key, offset in latest.items()}
        starts = {key: begin.get(key, 0) for key in ends}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        taken = bucket_ranges(starts, ends, max_rows).ranges
        # A partition dropped since keeps its last offset: the offset log never loses a key.
        return _to_offsets({**begin, **{key: taken.get(key, (0, starts[key]))[1] for key in ends}})

    def reportLatestOffset(self) -> Offsets:
        return _to_offsets(self._latest if self._latest is not None else self._high_watermarks())

    def partitions(self, start: Offsets, end: Offsets) -> list[InputPartition]:
        begin, ends = _to_keys(start), _to_keys(end)
        ranges = split_ranges({key: begin.get(key, 0) for key in ends}, ends, self._options.max_records_per_partition)
        return [InputPartition(piece) for piece in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self._reader.read(partition)

    def commit(self, end: Offsets) -> None:
        """Nothing to release: the log keeps every offset whatever a query has consumed."""

    def _high_watermarks(self) -> dict[LakeBucketKey, int]:
        """Every bucket's high watermark (every partition's, a lake-only one's lake end)."""
        options = self._options
        with connect(options.bootstrap, options.client_config) as conn:
            return TableOffsets(conn, conn.admin.get_table_info(options.path)).at(OffsetSpec.latest())
