"""LogTablet: appends, reads, timestamps, rolls, flush modes and retention of one bucket's log."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

from lakelog.errors import CorruptRecordError, InvalidRequestError, OffsetOutOfRangeError, StorageError
from lakelog.record.batch import HEADER_SIZE, decode_body, iter_headers
from lakelog.server.log.log_tablet import AppendResult, LogConfig, LogTablet

OpenTablet = Callable[..., LogTablet]
MakeBatch = Callable[..., bytes]
Batches = Callable[[bytes], list[tuple[int, int, int]]]


def read_all(tablet: LogTablet, max_bytes: int = 1 << 20) -> bytes:
    """Every record below the HW, read the way a consumer would: one read per segment or budget."""
    out = bytearray()
    offset = tablet.log_start_offset
    while offset < tablet.high_watermark:
        records = tablet.read(offset, max_bytes).records
        for _, header in iter_headers(records):
            offset = header.next_offset
        out += records
    return bytes(out)


def test_round_trip_across_many_segments(open_tablet: OpenTablet, make_batch: MakeBatch, batches: Batches) -> None:
    tablet = open_tablet(segment_max_bytes=2000, index_interval_bytes=300)
    results = [tablet.append(make_batch(i % 5 + 1, first=100 * i)) for i in range(60)]
    assert [r.base_offset for r in results[1:]] == [r.next_offset for r in results[:-1]]
    assert results[0].base_offset == 0 and tablet.log_end_offset == tablet.high_watermark == results[-1].next_offset
    segments = tablet.segments
    assert len(segments) > 5
    assert [s.base_offset for s in segments[1:]] == [s.next_offset for s in segments[:-1]]
    assert all(s.size <= 2000 for s in segments)
    assert all(s.path.name == f"{s.base_offset:020d}.log" for s in segments)

    # A read never spans two segments.
    first = tablet.read(0, 1 << 20).records
    assert batches(first)[-1][0] + batches(first)[-1][1] == segments[0].next_offset

    records = read_all(tablet)
    stored = batches(records)
    assert [(base, count) for base, count, _ in stored] == [(r.base_offset, r.record_count) for r in results]
    ids = [decode_body(records, pos, h).column("id").to_pylist() for pos, h in iter_headers(records)]
    assert ids == [list(range(100 * i, 100 * i + i % 5 + 1)) for i in range(60)]


def test_read_inside_a_batch_returns_that_batch(
    open_tablet: OpenTablet, make_batch: MakeBatch, batches: Batches
) -> None:
    tablet = open_tablet()
    for _ in range(5):
        tablet.append(make_batch(10))
    assert [b[:2] for b in batches(tablet.read(27, 1 << 20).records)] == [(20, 10), (30, 10), (40, 10)]
    assert [b[:2] for b in batches(tablet.read(20, 1 << 20).records)] == [(20, 10), (30, 10), (40, 10)]
    assert [b[:2] for b in batches(tablet.read(49, 1 << 20).records)] == [(40, 10)]


def test_max_bytes_is_honoured_but_one_batch_always_returned(
    open_tablet: OpenTablet, make_batch: MakeBatch, batches: Batches
) -> None:
    tablet = open_tablet()
    for _ in range(6):
        tablet.append(make_batch(3))
    size = len(make_batch(3))
    assert [b[0] for b in batches(tablet.read(0, 2 * size + size // 2).records)] == [0, 3]
    assert len(tablet.read(0, 2 * size).records) == 2 * size
    assert [b[0] for b in batches(tablet.read(4, 1).records)] == [3]
    assert [b[0] for b in batches(tablet.read(4, 0).records)] == [3]
    with pytest.raises(InvalidRequestError):
        tablet.read(0, -1)


def test_one_append_of_several_batches_shares_one_timestamp(
    open_tablet: OpenTablet, make_batch: MakeBatch, batches: Batches, clock
) -> None:
    tablet = open_tablet()
    result = tablet.append(make_batch(2) + make_batch(3) + make_batch(1))
    assert result == AppendResult(base_offset=0, next_offset=6, commit_timestamp=clock.now, record_count=6)
    assert batches(tablet.read(0, 1 << 20).records) == [(0, 2, clock.now), (2, 3, clock.now), (5, 1, clock.now)]


def test_timestamps_never_decrease_when_the_clock_goes_back(
    open_tablet: OpenTablet, make_batch: MakeBatch, batches: Batches, clock
) -> None:
    tablet = open_tablet()
    stamps = []
    for now in (5000, 7000, 6000, 1000, 9000, 8999):
        clock.now = now
        stamps.append(tablet.append(make_batch(1)).commit_timestamp)
    assert stamps == [5000, 7000, 7000, 7000, 9000, 9000]
    assert [ts for _, _, ts in batches(read_all(tablet))] == stamps
    tablet.close()
    clock.now = 10
    reopened = open_tablet()
    assert reopened.append(make_batch(1)).commit_timestamp == 9000  # also across a restart


def test_lookup_offset_by_timestamp_boundaries(open_tablet: OpenTablet, make_batch: MakeBatch, clock) -> None:
    tablet = open_tablet(segment_max_bytes=1000, index_interval_bytes=1)
    for i in range(12):  # batch i holds offsets [5i, 5i+5) stamped 1000 + 100i
        clock.now = 1000 + 100 * i
        tablet.append(make_batch(5))
    assert len(tablet.segments) > 2
    assert tablet.lookup_offset_by_timestamp(0) == 0  # before all
    assert tablet.lookup_offset_by_timestamp(1000) == 0
    assert tablet.lookup_offset_by_timestamp(1500) == 25  # equal to a batch's timestamp
    assert tablet.lookup_offset_by_timestamp(1501) == 30  # between batches
    assert tablet.lookup_offset_by_timestamp(2100) == 55  # the very last batch
    assert tablet.lookup_offset_by_timestamp(2101) is None  # after all


def test_lookup_with_equal_timestamps_finds_the_first(open_tablet: OpenTablet, make_batch: MakeBatch, clock) -> None:
    tablet = open_tablet(index_interval_bytes=1)
    clock.now = 500
    tablet.append(make_batch(2))
    clock.now = 700
    for _ in range(4):
        tablet.append(make_batch(2))
    assert tablet.lookup_offset_by_timestamp(600) == 2
    assert tablet.lookup_offset_by_timestamp(700) == 2


def test_roll_by_age(open_tablet: OpenTablet, make_batch: MakeBatch, clock) -> None:
    tablet = open_tablet(segment_max_age_ms=60_000)
    assert not tablet.maybe_roll_by_age()  # empty: nothing to roll
    tablet.append(make_batch(1))
    clock.now += 60_000
    assert not tablet.maybe_roll_by_age()
    clock.now += 1
    assert tablet.maybe_roll_by_age()
    assert [s.base_offset for s in tablet.segments] == [0, 1]
    assert not tablet.maybe_roll_by_age()

    tablet.append(make_batch(1))
    clock.now += 60_001
    tablet.append(make_batch(1))  # an append into an aged segment rolls first
    assert [s.base_offset for s in tablet.segments] == [0, 1, 2]


def test_forced_roll_skips_an_empty_segment(open_tablet: OpenTablet, make_batch: MakeBatch) -> None:
    tablet = open_tablet()
    tablet.roll()
    assert len(tablet.segments) == 1
    tablet.append(make_batch(4))
    tablet.roll()
    tablet.roll()
    assert [s.base_offset for s in tablet.segments] == [0, 4]
    assert tablet.append(make_batch(1)).base_offset == 4


def test_offsets_out_of_range(open_tablet: OpenTablet, make_batch: MakeBatch) -> None:
    tablet = open_tablet(segment_max_bytes=1)
    for _ in range(3):
        tablet.append(make_batch(2))
    assert tablet.read(6, 100).records == b""  # at the HW: nothing yet, not an error
    with pytest.raises(OffsetOutOfRangeError) as above:
        tablet.read(7, 100)
    assert (above.value.bucket, above.value.offset, above.value.earliest) == (0, 7, 0)
    assert tablet.delete_segments_before(4) == 2
    with pytest.raises(OffsetOutOfRangeError) as below:
        tablet.read(3, 100)
    assert (below.value.offset, below.value.earliest) == (3, 4)
    assert tablet.read(4, 100).log_start_offset == 4


def test_bad_appends_are_refused(open_tablet: OpenTablet, make_batch: MakeBatch) -> None:
    tablet = open_tablet(name="shop.orders bucket 3")
    with pytest.raises(InvalidRequestError):
        tablet.append(b"")
    good = make_batch(2)
    with pytest.raises(InvalidRequestError):
        tablet.append(good + good[: HEADER_SIZE + 3])
    flipped = bytearray(good)
    flipped[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="shop.orders bucket 3"):
        tablet.append(good + bytes(flipped))
    assert tablet.log_end_offset == 0  # nothing of a refused append is written
    assert tablet.append(good).base_offset == 0


def test_corrupt_stored_batch_fails_its_read_only(
    open_tablet: OpenTablet, make_batch: MakeBatch, batches: Batches
) -> None:
    """Damaged on disk before a restart: recovery keeps the bad batch (good ones follow it, so it is
    no torn write) and its reads fail naming the file; batches this process appended are trusted
    instead, the client checking them again."""
    before = open_tablet("a")
    other = open_tablet("b", name="shop.orders bucket 1")
    for _ in range(4):
        before.append(make_batch(5))
        other.append(make_batch(5))
    size = len(make_batch(5))
    segment = before.segments[0]
    fd = os.open(segment.path, os.O_RDWR)
    try:
        os.pwrite(fd, b"\xff\xff", 2 * size + HEADER_SIZE + 10)  # inside the body of the batch at offset 10
    finally:
        os.close(fd)
    tablet = open_tablet("a")
    with pytest.raises(CorruptRecordError) as raised:
        tablet.read(12, 1 << 20)
    assert str(segment.path) in str(raised.value)
    assert f"byte {2 * size}" in str(raised.value) and "offset 10" in str(raised.value)
    assert [b[0] for b in batches(tablet.read(0, 2 * size).records)] == [0, 5]  # the batches before it still read
    assert [b[0] for b in batches(read_all(other))] == [0, 5, 10, 15]
    assert other.append(make_batch(1)).base_offset == 20


def test_async_mode_high_watermark_is_immediate(
    open_tablet: OpenTablet, make_batch: MakeBatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    tablet = open_tablet(flush_mode="async", flush_interval_ms=3_600_000)
    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    result = tablet.append(make_batch(3))
    assert tablet.high_watermark == result.next_offset == 3
    assert fsyncs == []  # visible without an fsync
    assert tablet.read(0, 1 << 20).high_watermark == 3
    tablet.flush()
    assert fsyncs


def test_high_watermark_callback(tmp_path: Path, make_batch: MakeBatch) -> None:
    for mode in ("sync", "async"):
        seen: list[int] = []
        tablet: LogTablet

        def on_high_watermark() -> None:
            seen.append(tablet.high_watermark)  # may read the tablet: no lock is held

        tablet = LogTablet.open(tmp_path / mode, LogConfig(flush_mode=mode), 0, "t bucket 0", on_high_watermark)
        tablet.append(make_batch(2))
        tablet.append(make_batch(3))
        tablet.close()
        assert seen == [2, 5], mode


def test_group_commit_shares_fsyncs(
    open_tablet: OpenTablet, make_batch: MakeBatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    tablet = open_tablet(segment_max_bytes=1 << 30)
    fsyncs = 0
    fsync_lock = threading.Lock()
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        """An fsync as slow as a real disk's, even on tmpfs, so appenders do pile up behind it."""
        nonlocal fsyncs
        with fsync_lock:
            fsyncs += 1
        real_fsync(fd)
        time.sleep(0.002)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    threads, per_thread = 8, 100
    results: list[AppendResult] = []
    unflushed_acks: list[AppendResult] = []
    start = threading.Barrier(threads)

    def produce() -> None:
        batch = make_batch(2)
        start.wait()
        for _ in range(per_thread):
            result = tablet.append(batch)
            if tablet.high_watermark < result.next_offset:  # acknowledged means durable and visible
                unflushed_acks.append(result)
            results.append(result)

    workers = [threading.Thread(target=produce) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    appends = threads * per_thread
    assert len(results) == appends and unflushed_acks == []
    assert sorted(r.base_offset for r in results) == list(range(0, 2 * appends, 2))
    assert tablet.high_watermark == tablet.log_end_offset == 2 * appends
    assert fsyncs <= appends // 2, f"{fsyncs} fsyncs for {appends} appends"


def test_sync_mode_high_watermark_is_the_flushed_offset(
    open_tablet: OpenTablet, make_batch: MakeBatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    tablet = open_tablet()
    tablet.append(make_batch(2))
    broken = OSError(5, "Input/output error")

    def failing_fsync(fd: int) -> None:
        raise broken

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(StorageError, match="Input/output error"):
        tablet.append(make_batch(3))
    assert tablet.log_end_offset == 5 and tablet.high_watermark == 2  # written, not durable: invisible
    assert tablet.read(2, 100).records == b""
    monkeypatch.undo()
    assert tablet.append(make_batch(1)).next_offset == 6
    assert tablet.high_watermark == 6


def test_delete_segments_before_persists_log_start(
    open_tablet: OpenTablet, make_batch: MakeBatch, batches: Batches
) -> None:
    tablet = open_tablet(segment_max_bytes=1)  # one batch per segment
    for _ in range(5):
        tablet.append(make_batch(10))
    paths = [s.path for s in tablet.segments]
    assert tablet.delete_segments_before(25) == 2  # [0,10) and [10,20); [20,30) still holds 25..29
    assert tablet.log_start_offset == 20
    assert not paths[0].exists() and not paths[1].exists() and paths[2].exists()
    assert not paths[0].with_suffix(".index").exists()
    assert tablet.delete_segments_before(10) == 0
    assert tablet.delete_segments_before(10**9) == 2  # never the active segment
    assert tablet.log_start_offset == 40
    tablet.close()

    reopened = open_tablet()
    assert (reopened.log_start_offset, reopened.log_end_offset) == (40, 50)
    assert batches(reopened.read(40, 1 << 20).records)[0][:2] == (40, 10)
    with pytest.raises(OffsetOutOfRangeError):
        reopened.read(39, 100)


def test_read_snapshot_survives_a_concurrent_delete(
    open_tablet: OpenTablet, make_batch: MakeBatch, batches: Batches
) -> None:
    tablet = open_tablet(segment_max_bytes=1)
    for _ in range(3):
        tablet.append(make_batch(10))
    old = tablet.segments[0]
    tablet.delete_segments_before(10)
    assert not old.path.exists()
    assert batches(old.read(0, 1 << 20, old.size))[0][:2] == (0, 10)  # a reader holding it still reads


def test_closed_tablet_refuses_work(open_tablet: OpenTablet, make_batch: MakeBatch) -> None:
    tablet = open_tablet()
    tablet.append(make_batch(1))
    tablet.close()
    tablet.close()
    with pytest.raises(StorageError, match="closed"):
        tablet.append(make_batch(1))
    with pytest.raises(StorageError, match="closed"):
        tablet.read(0, 100)
    assert not tablet.maybe_roll_by_age()


def test_close_during_concurrent_appends_keeps_every_acknowledged_record(
    open_tablet: OpenTablet, make_batch: MakeBatch, batches: Batches
) -> None:
    tablet = open_tablet(segment_max_bytes=5000)
    acknowledged: list[AppendResult] = []
    refused: list[str] = []
    some_written = threading.Event()

    def produce() -> None:
        batch = make_batch(3)
        while True:
            try:
                acknowledged.append(tablet.append(batch))
            except StorageError as exc:
                refused.append(str(exc))
                return
            some_written.set()

    workers = [threading.Thread(target=produce) for _ in range(4)]
    for worker in workers:
        worker.start()
    some_written.wait()
    tablet.close()
    for worker in workers:
        worker.join()
    assert len(refused) == 4 and all("closed" in message for message in refused)

    reopened = open_tablet(segment_max_bytes=5000)
    assert reopened.log_end_offset == 3 * len(acknowledged)
    offset, stored = 0, []
    while offset < reopened.high_watermark:
        for base, count, _ in batches(reopened.read(offset, 1 << 20).records):
            stored.append(base)
            offset = base + count
    assert stored == sorted(r.base_offset for r in acknowledged)


def test_a_log_whose_directory_was_dropped_as_it_closed_closes_quietly(open_tablet: OpenTablet, make_batch: MakeBatch) -> None:
    """A partition dropped (its directory deleted) while the server stops: closing its log must not
    fail the shutdown of every other log."""
    tablet = open_tablet()
    tablet.append(make_batch(3))
    shutil.rmtree(tablet.directory)
    tablet.close()
