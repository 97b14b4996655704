"""Small lake batches combined: the same rows in the same order, in fewer batches, never over the
read's batch size; large batches untouched; the source closed with the reader."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from lakelog.lake.small_batches import COMBINED_ROWS, combine_small_batches

SCHEMA = pa.schema([("__offset", pa.int64()), ("name", pa.string())])


def _batch(start: int, rows: int) -> pa.RecordBatch:
    offsets = list(range(start, start + rows))
    return pa.record_batch([pa.array(offsets, pa.int64()), pa.array([f"r{n}" for n in offsets])], schema=SCHEMA)


def _runs(*sizes: int) -> list[pa.RecordBatch]:
    batches, start = [], 0
    for size in sizes:
        batches.append(_batch(start, size))
        start += size
    return batches


def _rows(batches: list[pa.RecordBatch]) -> pa.Table:
    return pa.Table.from_batches(batches, schema=SCHEMA)


def test_many_small_batches_come_out_as_few_with_the_same_rows_in_order() -> None:
    small = _runs(*[200] * 1000)  # 1,000 files of 200 rows
    combined = list(combine_small_batches(iter(small), 65_536))
    assert _rows(combined).equals(_rows(small))
    assert len(combined) == -(-200_000 // COMBINED_ROWS)
    assert all(batch.schema == SCHEMA for batch in combined)


def test_no_combined_batch_is_larger_than_the_reads_batch_size() -> None:
    small = _runs(*[3] * 100)
    combined = list(combine_small_batches(iter(small), 10))
    assert _rows(combined).equals(_rows(small))
    assert max(batch.num_rows for batch in combined) <= 10
    assert len(combined) == 34  # 9 rows each but the last: a fourth 3-row batch would pass 10


def test_large_batches_pass_through_as_they_are_between_runs_of_small_ones() -> None:
    batches = _runs(10, 20, COMBINED_ROWS, 5, 0, 7)
    combined = list(combine_small_batches(iter(batches), 65_536))
    assert [batch.num_rows for batch in combined] == [30, COMBINED_ROWS, 12]
    assert combined[1] is batches[2]
    assert _rows(combined).equals(_rows(batches))


def test_closing_the_combined_batches_closes_the_source() -> None:
    closed: list[bool] = []

    def source() -> Iterator[pa.RecordBatch]:
        try:
            yield from _runs(COMBINED_ROWS, COMBINED_ROWS, COMBINED_ROWS)
        finally:
            closed.append(True)

    combined = combine_small_batches(source(), 65_536)
    assert next(combined).num_rows == COMBINED_ROWS
    combined.close()
    assert closed == [True]
