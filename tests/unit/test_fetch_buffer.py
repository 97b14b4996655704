"""A scanner's fetch buffer alone: a seek or an unsubscribe forgets what was buffered for the bucket
and gives its tier reader back to be closed, the read-ahead budget gets back what was held, a
bucket is fetched again only once its buffered answers end in records, and listeners hear every
arrival."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lakelog.client.rpc.messages import FetchedBucket
from lakelog.client.scanner.fetch_buffer import LAKE_TIER, FetchBuffer, LakeOnlyRange, plain
from lakelog.client.scanner.read_ahead_budget import ReadAheadBudget
from lakelog.client.table_bucket import TableBucket
from lakelog.errors import OffsetOutOfRangeError
from lakelog.fetch_info import LakeLogFetchInfo

BUCKET = TableBucket(7, None, 0)
OTHER = TableBucket(7, 40, 0)


@dataclass
class Reader:
    """A tier reader that holds ``batches`` ready (the buffer only asks whether it is ready)."""

    tier: str = LAKE_TIER
    next_offset: int = 0
    high_watermark: int = 100
    batches: int = 0

    @property
    def done(self) -> bool:
        return False

    def ready(self) -> bool:
        return self.batches > 0

    def read(self, max_bytes: int, max_records: int | None = None) -> pa.Table:
        raise AssertionError("the buffer never reads a tier itself")

    def close(self) -> None:
        raise AssertionError("the buffer hands readers back to be closed outside its lock")


def buffered(buffer: FetchBuffer, bucket: TableBucket, *answers: FetchedBucket) -> None:
    """Answers as the fetcher leaves them: their bytes held in the budget."""
    for answer in answers:
        buffer.budget.add(len(answer.records))
    buffer.completed.setdefault(bucket, []).extend(answers)
    buffer.next_fetch[bucket] = answers[-1].fetch_offset + 10


def test_a_seek_forgets_the_bucket_s_answers_releases_their_bytes_and_hands_back_its_reader() -> None:
    buffer = FetchBuffer(ReadAheadBudget(1 << 20))
    buffered(buffer, BUCKET, FetchedBucket(BUCKET, 0, b"x" * 300), FetchedBucket(BUCKET, 10, b"y" * 200))
    buffered(buffer, OTHER, FetchedBucket(OTHER, 0, b"z" * 50))
    reader = Reader()
    buffer.readers[BUCKET] = reader
    assert buffer.budget.held == 550
    assert buffer.seek(BUCKET, 42) is reader
    assert buffer.positions[BUCKET] == 42 and BUCKET not in buffer.completed and BUCKET not in buffer.next_fetch
    assert buffer.budget.held == 50, "the other bucket keeps what it had"
    assert OTHER in buffer.completed


def test_an_unsubscribed_bucket_is_forgotten_entirely() -> None:
    buffer = FetchBuffer(ReadAheadBudget(1 << 20))
    buffer.seek(BUCKET, 5, LakeOnlyRange(end=90, snapshot_id=3))
    assert buffer.lake_only[BUCKET] == LakeOnlyRange(90, 3)
    buffered(buffer, BUCKET, FetchedBucket(BUCKET, 5, b"abc"))
    assert buffer.unsubscribe(BUCKET) is None
    assert BUCKET not in buffer.positions and BUCKET not in buffer.lake_only and buffer.budget.held == 0


def test_a_seek_without_a_lake_range_ends_the_bucket_s_lake_only_read() -> None:
    buffer = FetchBuffer(ReadAheadBudget(1 << 20))
    buffer.seek(BUCKET, 0, LakeOnlyRange(end=90, snapshot_id=3))
    buffer.seek(BUCKET, 10)
    assert BUCKET not in buffer.lake_only


def test_a_windowed_lake_reader_gives_its_place_back_when_it_is_popped() -> None:
    budget = ReadAheadBudget(4 << 20)
    buffer = FetchBuffer(budget)
    assert budget.try_open_reader() and not budget.try_open_reader()
    buffer.readers[BUCKET] = Reader()
    buffer.windowed.add(BUCKET)
    buffer.pop_reader(BUCKET)
    assert budget.try_open_reader(), "the reader's place in the window is free again"


def test_a_bucket_is_fetched_on_only_while_its_buffered_answers_end_in_records() -> None:
    buffer = FetchBuffer(ReadAheadBudget(1 << 20))
    assert buffer.reads_on(BUCKET)
    buffered(buffer, BUCKET, FetchedBucket(BUCKET, 0, b"rows"))
    assert buffer.reads_on(BUCKET)
    buffered(buffer, BUCKET, FetchedBucket(BUCKET, 10, lake=LakeLogFetchInfo(4, 500)))
    assert not buffer.reads_on(BUCKET), "the lake pointer is polled before the bucket is fetched again"
    buffer.drop_completed(BUCKET)
    buffered(buffer, BUCKET, FetchedBucket(BUCKET, 0, error=OffsetOutOfRangeError(0, 0, 10)))
    assert not buffer.reads_on(BUCKET)


def test_plain_answers_are_records_or_nothing_from_the_log() -> None:
    assert plain(FetchedBucket(BUCKET, 0, b"rows")) and plain(FetchedBucket(BUCKET, 0))
    assert not plain(FetchedBucket(BUCKET, 0, lake=LakeLogFetchInfo(1, 2)))
    assert not plain(FetchedBucket(BUCKET, 0, error=OffsetOutOfRangeError(0, 0, 1)))


def test_a_poll_has_data_when_an_answer_or_a_reader_s_batch_is_waiting() -> None:
    buffer = FetchBuffer(ReadAheadBudget(1 << 20))
    assert not buffer.has_data()
    buffer.readers[BUCKET] = Reader(batches=0)
    assert not buffer.has_data()
    buffer.readers[BUCKET].batches = 1  # type: ignore[attr-defined]
    assert buffer.has_data()
    buffer.readers.clear()
    buffered(buffer, OTHER, FetchedBucket(OTHER, 0, b"r"))
    assert buffer.has_data()
    buffer.wait(timeout_s=30)  # returns at once: there is data


def test_every_arrival_wakes_the_listeners() -> None:
    buffer = FetchBuffer(ReadAheadBudget(1 << 20))
    heard: list[int] = []
    buffer.listeners.append(lambda: heard.append(1))
    buffer.wakeup()
    with buffer.cond:
        buffer.notify()
    assert heard == [1, 1]


def test_table_buckets_sort_unpartitioned_first_and_read_as_the_public_api_keys_them() -> None:
    buckets = [TableBucket(7, 41, 1), TableBucket(7, None, 2), TableBucket(7, 40, 3), TableBucket(6, 99, 0)]
    assert [str(b) for b in sorted(buckets, key=lambda b: b.order)] == [
        "table 6 partition 99 bucket 0", "table 7 bucket 2", "table 7 partition 40 bucket 3", "table 7 partition 41 bucket 1",
    ]
    assert TableBucket(7, 40, 3).public_key(by_partition=True) == (40, 3)
    assert TableBucket(7, 40, 3).public_key(by_partition=False) == 3
    assert TableBucket(7, None, 3).public_key(by_partition=True) == 3
