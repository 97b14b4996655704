"""What a poll takes out of the fetch buffer: records in offset order per bucket, under the caps.

As Fluss's ``LogFetchCollector``: it decodes buffered answers and reads the tier readers, at most
``max_records`` records shared by the buckets that have some (:class:`RecordQuota`), advances each
bucket's position over the records it returns and nothing else, and acts on what is not records:
a pointer to remote segments or the lake starts that tier's reader, a routing or transport error
schedules the bucket's retry (and a leader refresh), an offset out of range resets the bucket as
``client.scanner.offset-reset`` says or is raised, an answer that no longer starts at the bucket's
position is dropped, and a partition found gone is left to the scanner. What is left stays
buffered, undecoded, for the next poll. An error after some records were taken is raised by the
next poll, so those records are returned and no position moves past records the caller never got.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

import pyarrow as pa

from lakelog.config import Configuration
from lakelog.errors import CorruptRecordError, LakelogError, OffsetOutOfRangeError, PartitionNotExistError, TableNotExistError
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.messages import FetchedBucket
from lakelog.client.scanner.batch_decoder import constant_array, decode_records
from lakelog.client.scanner.fetch_buffer import LOCAL_TIER, FetchBuffer, TierReader, plain
from lakelog.client.scanner.log_fetcher import LogFetcher
from lakelog.client.scanner.record_quota import RecordQuota
from lakelog.client.table_bucket import TableBucket
from lakelog.record.meta_columns import OFFSET_COLUMN, PARTITION_ID_FIELD

log = logging.getLogger(__name__)

# The errors of a bucket whose partition (or table) is gone: the scanner decides what follows.
GONE_ERRORS = (PartitionNotExistError, TableNotExistError)


@dataclass(frozen=True)
class Collected:
    """What one poll collected."""

    tables: dict[TableBucket, pa.Table]
    high_watermarks: dict[TableBucket, int]


class FetchCollector:
    def __init__(self, buffer: FetchBuffer, fetcher: LogFetcher, router: LeaderRouter, conf: Configuration, by_partition: bool) -> None:
        """``by_partition``: records get the ``__partition_id`` column (a scan over a partitioned table's partitions)."""
        self._buffer = buffer
        self._fetcher = fetcher
        self._router = router
        self._offset_reset: str = conf.get("client.scanner.offset-reset")
        self._by_partition = by_partition
        self._deferred_error: LakelogError | None = None

    def collect(self, max_records: int | None = None) -> Collected:
        """Records buffered and read by the tier readers, at most ``max_records`` (None: all)."""
        if self._deferred_error is not None:
            error, self._deferred_error = self._deferred_error, None
            raise error
        buffer = self._buffer
        with buffer.cond:
            if buffer.holding():
                return Collected({}, {})
            completed, buffer.completed = buffer.completed, {}
            buckets = sorted(set(completed) | set(buffer.readers), key=lambda b: b.order)
            buffer.taking.update(bucket for bucket, answers in completed.items() if answers and not plain(answers[-1]))
        tables: dict[TableBucket, pa.Table] = {}
        high_watermarks: dict[TableBucket, int] = {}
        quota = RecordQuota(max_records, len(buckets))
        try:
            for bucket in buckets:
                share = quota.share()
                self._take_answers(bucket, completed.get(bucket, []), share, tables, high_watermarks)
                with buffer.cond:
                    reader = buffer.readers.get(bucket)
                if reader is not None and (share is None or _rows(tables, bucket) < share):
                    rest = None if share is None else share - _rows(tables, bucket)
                    self._read_tier(bucket, reader, rest, tables, high_watermarks)
                quota.took(_rows(tables, bucket))
        except LakelogError as error:
            if not tables:
                raise
            self._deferred_error = error
        finally:
            with buffer.cond:
                for bucket, answers in completed.items():
                    if answers and bucket in buffer.positions:
                        buffer.completed[bucket] = answers + buffer.completed.get(bucket, [])
                    else:
                        for fetch in answers:
                            buffer.budget.release(len(fetch.records))
                buffer.taking.difference_update(completed)
        if self._by_partition:
            tables = {bucket: _with_partition_id(table, bucket) for bucket, table in tables.items()}
        return Collected(tables, high_watermarks)

    def _take_answers(
        self,
        bucket: TableBucket,
        answers: list[FetchedBucket],
        share: int | None,
        tables: dict[TableBucket, pa.Table],
        high_watermarks: dict[TableBucket, int],
    ) -> None:
        """Take the bucket's buffered answers in order, up to ``share`` records (None: all); an
        answer taken in part is put back holding the rest."""
        budget = self._buffer.budget
        while answers and (share is None or _rows(tables, bucket) < share):
            fetch = answers.pop(0)
            budget.release(len(fetch.records))
            if self._buffer.positions.get(bucket) != fetch.fetch_offset or fetch.error is not None:
                self._restart(bucket, answers)
            try:
                rest = self._take(bucket, fetch, None if share is None else share - _rows(tables, bucket), tables, high_watermarks)
            except LakelogError:
                self._restart(bucket, answers)
                raise
            if rest is not None:
                answers.insert(0, rest)
                budget.add(len(rest.records))

    def _take(
        self,
        bucket: TableBucket,
        fetch: FetchedBucket,
        limit: int | None,
        tables: dict[TableBucket, pa.Table],
        high_watermarks: dict[TableBucket, int],
    ) -> FetchedBucket | None:
        """Act on one answer, unless it no longer starts at the bucket's position; take at most
        ``limit`` of its records (None: all). The answer with the records not taken, if any."""
        if self._buffer.positions.get(bucket) != fetch.fetch_offset:
            return None  # re-subscribed, or after an answer that failed: the bucket is fetched again
        if fetch.error is not None:
            self._handle_error(fetch)
            return None
        with self._buffer.cond:
            retried = self._buffer.retries.pop(bucket, 0)
        if retried:
            log.info("fetch of %s works again after %d retries", self._fetcher.where(bucket), retried)
        high_watermarks[bucket] = fetch.high_watermark
        if fetch.remote is not None:
            self._fetcher.start_reader(bucket, self._fetcher.remote_reader(fetch))
        elif fetch.lake is not None:
            lake = fetch.lake
            reader = self._fetcher.lake_reader(bucket, fetch.fetch_offset, lake.log_end_offset, lake.snapshot_id, fetch.high_watermark)
            self._fetcher.start_reader(bucket, reader)
        elif fetch.records:
            where = self._fetcher.where(bucket)
            table, end = decode_records(fetch.records, bucket.bucket, fetch.fetch_offset, self._fetcher.out_schema, where, limit)
            self._accept(bucket, fetch.fetch_offset, table, tables, LOCAL_TIER)
            if end < len(fetch.records):
                return replace(fetch, fetch_offset=fetch.fetch_offset + table.num_rows, records=memoryview(fetch.records)[end:])
        return None

    def _restart(self, bucket: TableBucket, answers: list[FetchedBucket]) -> None:
        """Drop what was read ahead of a bucket (after a failed or stale answer): its next fetch
        starts at its position again, and answers to fetches sent beyond it are dropped as they come."""
        for fetch in answers:
            self._buffer.budget.release(len(fetch.records))
        answers.clear()
        with self._buffer.cond:
            self._buffer.drop_completed(bucket)

    def _accept(self, bucket: TableBucket, fetch_offset: int, table: pa.Table, tables: dict[TableBucket, pa.Table], tier: str) -> None:
        """Return ``table`` and move the bucket past it, unless the bucket was re-subscribed meanwhile."""
        if not table.num_rows:
            return
        self._check_contiguous(bucket, fetch_offset, table)
        buffer = self._buffer
        with buffer.cond:
            if buffer.positions.get(bucket) != fetch_offset:
                return
            buffer.positions[bucket] = fetch_offset + table.num_rows
            buffer.records_by_tier[tier] += table.num_rows
        tables[bucket] = pa.concat_tables([tables[bucket], table]) if bucket in tables else table

    def _read_tier(
        self, bucket: TableBucket, reader: TierReader, limit: int | None, tables: dict[TableBucket, pa.Table], high_watermarks: dict[TableBucket, int]
    ) -> None:
        """Take the next remote or lake records of ``bucket``, at most ``limit`` (None: a read's
        worth). A failed read is dropped with the position unchanged, so the next poll asks the
        server again where to continue (a lake-only bucket opens a new lake read)."""
        high_watermarks[bucket] = reader.high_watermark
        try:
            offset = reader.next_offset
            self._accept(bucket, offset, reader.read(self._fetcher.bucket_bytes, limit), tables, reader.tier)
        except LakelogError:
            self._drop_reader(bucket)
            raise
        if reader.done:
            self._drop_reader(bucket)

    def _drop_reader(self, bucket: TableBucket) -> None:
        with self._buffer.cond:
            reader = self._buffer.pop_reader(bucket)
        if reader is not None:
            reader.close()

    def _check_contiguous(self, bucket: TableBucket, fetch_offset: int, table: pa.Table) -> None:
        offsets = table.column(OFFSET_COLUMN)
        first, last = offsets[0].as_py(), offsets[-1].as_py()
        if first != fetch_offset or last != fetch_offset + table.num_rows - 1:
            raise CorruptRecordError(
                f"{self._fetcher.where(bucket)}: fetch at offset {fetch_offset} returned offsets "
                f"{first}..{last} for {table.num_rows} records (a gap or an overlap)"
            )

    def _handle_error(self, fetch: FetchedBucket) -> None:
        error = fetch.error
        assert error is not None
        bucket = fetch.bucket
        if isinstance(error, OffsetOutOfRangeError):
            if self._offset_reset == "error" or fetch.log_start_offset < 0:
                raise OffsetOutOfRangeError(bucket.bucket, fetch.fetch_offset, fetch.log_start_offset)
            self._reset_offset(fetch)
            return
        if isinstance(error, GONE_ERRORS) and bucket.partition_id is not None:
            with self._buffer.cond:
                self._buffer.gone[bucket.partition_id] = error
            return
        buffer = self._buffer
        with buffer.cond:
            attempt = buffer.retries.get(bucket, 0)
        delay = self._router.retry_delay_s(error, attempt, resend_safe=True, table_id=self._fetcher.info(bucket).physical_id)
        if delay is None:
            # A storage outage is the caller's to see (and to retry); leader moves and restarts are ours.
            raise error.naming(self._fetcher.where(bucket))
        if not attempt:
            log.info("fetch of %s failed, retrying until it works: %s", self._fetcher.where(bucket), error)
        with buffer.cond:
            buffer.retries[bucket] = attempt + 1
            buffer.retry_at[bucket] = time.monotonic() + delay

    def _reset_offset(self, fetch: FetchedBucket) -> None:
        """Move a bucket no tier can serve to the earliest readable offset or to the high watermark,
        as ``client.scanner.offset-reset`` says: both come from the same failed answer, so the reset
        is deterministic and costs no extra round trip. Logged once, with the range the consumer
        will never see (or the rewind), because a silent reset would hide lost data."""
        target = fetch.log_start_offset if self._offset_reset == "earliest" else max(fetch.high_watermark, fetch.log_start_offset)
        with self._buffer.cond:
            if self._buffer.positions.get(fetch.bucket) != fetch.fetch_offset:
                return  # re-subscribed meanwhile: the caller chose a position itself
            self._buffer.positions[fetch.bucket] = target
        if target >= fetch.fetch_offset:
            change = f"skipping offsets [{fetch.fetch_offset}, {target})"
        else:
            change = f"rewinding from offset {fetch.fetch_offset} to {target}"
        log.warning(
            "%s: offset %d is out of range (offset-reset=%s), %s",
            self._fetcher.where(fetch.bucket), fetch.fetch_offset, self._offset_reset, change,
        )


def _rows(tables: dict[TableBucket, pa.Table], bucket: TableBucket) -> int:
    table = tables.get(bucket)
    return table.num_rows if table is not None else 0


def _with_partition_id(table: pa.Table, bucket: TableBucket) -> pa.Table:
    return table.append_column(PARTITION_ID_FIELD, constant_array(bucket.partition_id, table.num_rows, pa.int64()))
