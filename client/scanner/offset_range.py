"""Read one bucket's bounded range ``[start, end)`` through a LogScanner, checked record by record.

Jobs that split a log into ranges (:mod:`lakelog.log_ranges`: the tiering job, the Spark reader) need exactly the offsets of
their range, each once, in order, and must fail rather than wait forever when a range below the
high watermark stops yielding (leader gone, data lost). A plain poll loop gives none of that.
"""

from __future__ import annotations

import time
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import CorruptRecordError, RequestTimeoutError
from lakelog.metadata import TablePath
from lakelog.client.scanner.log_scanner import LogScanner
from lakelog.record.meta_columns import OFFSET_COLUMN

POLL_TIMEOUT_MS = 1000
# A range below the high watermark is always readable; a bucket that yields nothing this long is broken.
STALL_TIMEOUT_S = 120.0


def read_offset_range(
    scanner: LogScanner, path: TablePath, bucket: int, start: int, end: int, partition_id: int | None = None
) -> Iterator[pa.Table]:
    """Subscribe ``scanner`` (a scanner of table ``path``) to ``bucket`` (of partition
    ``partition_id`` of a partitioned table's scanner) at ``start`` and yield its
    polls up to ``end`` (exclusive), each poll as it arrives: memory stays bounded by one poll, not
    the range. The scanner returns a bucket in offset order; that is checked, not repaired.

    Raises :class:`CorruptRecordError` on a gap, a duplicate or a record out of order and :class:`RequestTimeoutError`
    when no record arrives for :data:`STALL_TIMEOUT_S`.
    """
    where = f"{path} bucket {bucket}" if partition_id is None else f"{path} partition id {partition_id} bucket {bucket}"
    if partition_id is None:
        scanner.subscribe(bucket, start)
    else:
        scanner.subscribe_partition(partition_id, bucket, start)
    next_offset = start
    last_progress = time.monotonic()
    while next_offset < end:
        polled = scanner.poll_arrow(timeout_ms=POLL_TIMEOUT_MS)
        if polled.num_rows == 0:
            if time.monotonic() - last_progress > STALL_TIMEOUT_S:
                raise RequestTimeoutError(
                    f"{where}: no record at offset {next_offset} for {STALL_TIMEOUT_S:.0f} s (reading [{start}, {end}))"
                )
            continue
        last_progress = time.monotonic()
        polled = polled.slice(0, end - next_offset)
        offsets = polled.column(OFFSET_COLUMN)
        first, last = offsets[0].as_py(), offsets[-1].as_py()
        if first != next_offset or last != next_offset + polled.num_rows - 1 or not _increasing(offsets):
            raise CorruptRecordError(
                f"{where}: expected offsets from {next_offset}, got {first}..{last} in {polled.num_rows} records"
            )
        next_offset = last + 1
        yield polled


def _increasing(offsets: pa.ChunkedArray) -> bool:
    """Strictly increasing: with the first and last offset and the count right, no gap and no duplicate."""
    if len(offsets) < 2:
        return True
    return pc.all(pc.greater(offsets[1:], offsets[:-1])).as_py()
