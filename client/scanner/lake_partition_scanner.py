"""The scanner of a lake-only partition: one dropped from the log of a lake-enabled table once the
lake held all of it (``PartitionInfo.lake_only``).

No tablet server holds such a partition any more, so nothing is fetched: each subscribed bucket's
range ``[lake start, lake end)`` of the coordinator's lake snapshot is read straight from the
table's LogSource with :class:`LakeLogReader` (offsets checked batch by batch, as after a lake
answer of a server), and then the bucket is finished: no record can come after the lake's end.
Readers are opened as the scanner's :class:`ReadAheadBudget` allows (a window of them, shared with
the other partitions of the same scanner), not one per bucket at once.
"""

from __future__ import annotations

import time
from typing import Iterable

import pyarrow as pa

from lakelog.errors import InvalidTimestampError, LakelogError, OffsetOutOfRangeError
from lakelog.log_source import FetchContext, LogSource
from lakelog.metadata import LakeBucketOffset, LakeSnapshot, TableInfo
from lakelog.client.admin import lake_offset
from lakelog.client.scanner.lake_log_reader import LakeLogReader
from lakelog.client.scanner.read_ahead_budget import READER_BYTES, ReadAheadBudget
from lakelog.client.scanner.record_quota import RecordQuota
from lakelog.client.scanner.scan_records import ScanRecords
from lakelog.client.table_bucket import TableBucket
from lakelog.record.meta_columns import with_meta_fields

POLL_WAIT_S = 0.01
TIER = LakeLogReader.tier


class LakePartitionScanner:
    def __init__(
        self, info: TableInfo, projection: list[int] | None, source: LogSource, lake: LakeSnapshot, budget: ReadAheadBudget
    ) -> None:
        """``info``: the partition's info; ``lake``: the table's lake snapshot from the coordinator;
        ``budget``: what its lake readers read ahead against (the partitioned scanner's)."""
        assert info.partition_id is not None
        self._info = info
        self._projection = projection
        self._source = source
        self._snapshot_id = lake.snapshot_id
        # A partitioned table's lake snapshot keys its buckets by (partition_id, bucket).
        self._ranges: dict[int, LakeBucketOffset] = {
            bucket: offsets for (partition_id, bucket), offsets in lake.bucket_offsets.items() if partition_id == info.partition_id
        }
        fields = [info.schema.field(i) for i in projection] if projection else list(info.schema)
        self._out_schema = with_meta_fields(pa.schema(fields))
        self._positions: dict[int, int] = {}
        self._readers: dict[int, LakeLogReader] = {}
        self._budget = budget
        self._records = 0

    def _range(self, bucket: int) -> tuple[int, int]:
        found = self._ranges.get(bucket)
        return (found.log_start_offset, found.log_end_offset) if found else (0, 0)

    # subscriptions

    def subscribe(self, bucket: int, offset: int) -> None:
        start, end = self._range(bucket)
        if not start <= offset <= end:
            raise OffsetOutOfRangeError(
                bucket,
                offset,
                start,
                f"{self._info.label} is held by the lake only: bucket {bucket} has offsets [{start}, {end}), not {offset}",
            )
        self._close_reader(bucket)
        self._positions[bucket] = offset

    def subscribe_from_beginning(self, buckets: Iterable[int] | None = None) -> None:
        for bucket in self._buckets(buckets):
            self.subscribe(bucket, self._range(bucket)[0])

    def subscribe_from_timestamp(self, ms: int, buckets: Iterable[int] | None = None) -> None:
        for bucket in self._buckets(buckets):
            start, end = self._range(bucket)
            try:
                offset = lake_offset(self._source, self._info, bucket, ms, self._snapshot_id) if end > start else end
            except InvalidTimestampError:
                offset = end
            self.subscribe(bucket, offset)

    def _buckets(self, buckets: Iterable[int] | None) -> list[int]:
        return list(range(self._info.buckets)) if buckets is None else list(buckets)

    def unsubscribe(self, bucket: int) -> None:
        self._close_reader(bucket)
        self._positions.pop(bucket, None)

    def positions(self) -> dict[int, int]:
        return dict(self._positions)

    def records_by_tier(self) -> dict[str, int]:
        return {TIER: self._records} if self._records else {}

    # reading

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> ScanRecords:
        """What the lake readers have read since the last poll (waiting up to ``timeout_ms`` for
        some), at most ``max_records`` (None or <= 0: no limit) shared evenly by the buckets."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while True:
            tables: dict[TableBucket, pa.Table] = {}
            quota = RecordQuota(max_records, len(self._positions))
            for bucket in list(self._positions):
                if quota.exhausted:
                    break
                read = self._read(bucket, quota.share())
                quota.took(read.num_rows)
                if read.num_rows:
                    tables[self._table_bucket(bucket)] = read
            if tables or time.monotonic() >= deadline:
                return ScanRecords(self._out_schema, tables, {self._table_bucket(b): self._range(b)[1] for b in self._positions})
            time.sleep(POLL_WAIT_S)

    def _table_bucket(self, bucket: int) -> TableBucket:
        return TableBucket(self._info.table_id, self._info.partition_id, bucket)

    def _read(self, bucket: int, max_records: int | None) -> pa.Table:
        position = self._positions[bucket]
        end = self._range(bucket)[1]
        if position >= end:
            return self._out_schema.empty_table()
        reader = self._readers.get(bucket)
        if reader is None:
            if not self._budget.try_open_reader():
                return self._out_schema.empty_table()  # the bucket's turn comes when another reader ends
            context = FetchContext(position, end, self._info.partition_name, bucket, self._snapshot_id, self._projection or None)
            where = f"{self._info.label} bucket {bucket}"
            reader = self._readers[bucket] = LakeLogReader(
                self._source, context, self._out_schema, where, end, self._budget, lambda: None
            )
        try:
            read = reader.read(READER_BYTES, max_records)
        except LakelogError:
            self._close_reader(bucket)  # its window turn is freed; the next poll reads on from the position
            raise
        self._positions[bucket] = reader.next_offset
        self._records += read.num_rows
        if reader.done or reader.next_offset >= end:
            self._close_reader(bucket)  # read to the end: its turn in the window goes to the next
        return read

    def end_offsets(self) -> dict[int, int]:
        """Per subscribed bucket, the lake's end: nothing comes after it."""
        return {bucket: self._range(bucket)[1] for bucket in self._positions}

    def _close_reader(self, bucket: int) -> None:
        reader = self._readers.pop(bucket, None)
        if reader is not None:
            reader.close()
            self._budget.reader_closed()

    def close(self) -> None:
        for bucket in list(self._readers):
            self._close_reader(bucket)
        self._positions.clear()
