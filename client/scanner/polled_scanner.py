"""What every user-facing scanner offers on top of its own ``poll``, positions and end offsets:
iteration, reading to the end in the columnar forms, and ``with``. One base, so a table's and a
partitioned table's scanner behave the same in each of them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterator, Mapping, Self

import pyarrow as pa

from lakelog.client.scanner.scan_records import ScanRecord, ScanRecords
from lakelog.record.meta_columns import OFFSET_COLUMN

ITERATION_POLL_MS = 1000
RECEIVE_WAIT_MS = 500


class PolledScanner(ABC):
    _out_schema: pa.Schema

    @abstractmethod
    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> ScanRecords: ...

    @abstractmethod
    def positions(self) -> Mapping[Any, int]: ...

    @abstractmethod
    def end_offsets(self) -> dict[Any, int]:
        """Per subscribed bucket, where a read to the end stops: its latest offset now (never
        before its position)."""

    @abstractmethod
    def _seek(self, bucket: Any, offset: int) -> None:
        """Set ``bucket`` back to ``offset``: records a read to the end did not return."""

    @abstractmethod
    def close(self) -> None: ...

    def _poll_to_end(self, timeout_ms: int) -> ScanRecords:
        """The poll of a read to the end (a scanner may leave out what only later polls do)."""
        return self.poll(timeout_ms)

    def iterate(self, timeout_ms: int = ITERATION_POLL_MS) -> Iterator[ScanRecord]:
        """Records poll by poll, until a poll of ``timeout_ms`` brings none."""
        while records := self.poll(timeout_ms):
            yield from records

    def __iter__(self) -> Iterator[ScanRecord]:
        """``for record in scanner``: what there is now, ending once a poll of 1 s brings nothing."""
        return self.iterate()

    def poll_arrow(self, timeout_ms: int = 1000) -> pa.Table:
        """Like :meth:`poll`, as one Arrow table with the meta columns (``__bucket``, ``__offset``,
        ``__timestamp``, and ``__partition_id`` for a partitioned table)."""
        return self.poll(timeout_ms).to_arrow()

    def to_arrow_batch_reader(self) -> pa.RecordBatchReader:
        """Like :meth:`to_arrow`, streamed: each poll's records become batches as the reader is read,
        so a table larger than memory can go to Parquet, DuckDB or polars. The latest offsets are
        taken now, when the reader is made."""
        return pa.RecordBatchReader.from_batches(self._out_schema, self._batches_until(self.end_offsets()))

    def _batches_until(self, ends: dict[Any, int]) -> Iterator[pa.RecordBatch]:
        """Poll until every bucket reached its end offset; records past an end are not returned, and
        the bucket is set back to its end, so they are not lost to the next poll either."""
        try:
            while any(self.positions().get(bucket, end) < end for bucket, end in ends.items()):
                records = self._poll_to_end(RECEIVE_WAIT_MS)
                for bucket in records.buckets():
                    table = records.to_arrow(bucket)
                    keep = ends.get(bucket, 0) - table.column(OFFSET_COLUMN)[0].as_py()
                    if keep > 0:
                        yield from table.slice(0, keep).to_batches()
        finally:
            positions = self.positions()
            for bucket, end in ends.items():
                if positions.get(bucket, end) > end:
                    self._seek(bucket, end)

    def to_arrow(self) -> pa.Table:
        """Every subscribed bucket from its position up to its latest offset taken now, as one table
        (with the meta columns); records appended later are left for the next read. Positions end
        at those latest offsets."""
        return self.to_arrow_batch_reader().read_all()

    def to_pandas(self) -> Any:
        """:meth:`to_arrow` as a pandas DataFrame (needs pandas)."""
        return self.to_arrow().to_pandas()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
