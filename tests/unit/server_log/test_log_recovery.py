"""Opening a bucket's log after a crash or a clean shutdown: torn tails, broken indexes, leftovers."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Callable

import pytest

from lakelog.errors import CorruptRecordError, LogFencedError
from lakelog.record.batch import HEADER_SIZE
from lakelog.server.log.log_loader import CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_FILE
from lakelog.server.log.log_tablet import LogTablet
from lakelog.server.log.offset_index import OffsetIndex

OpenTablet = Callable[..., LogTablet]
MakeBatch = Callable[..., bytes]
Batches = Callable[[bytes], list[tuple[int, int, int]]]


def flip_byte(path: Path, position: int) -> None:
    with open(path, "r+b") as file:
        file.seek(position)
        byte = file.read(1)
        file.seek(position)
        file.write(bytes([byte[0] ^ 0xFF]))


def test_torn_tail_is_cut_and_appends_continue(
    open_tablet: OpenTablet, make_batch: MakeBatch, batches: Batches, caplog: pytest.LogCaptureFixture
) -> None:
    crashed = open_tablet(segment_max_bytes=2000)
    for _ in range(12):
        crashed.append(make_batch(5))
    active = crashed.segments[-1]
    size = len(make_batch(5))
    assert active.size >= 2 * size
    with open(active.path, "r+b") as file:  # a half-written last batch, as a kill -9 can leave
        file.truncate(active.size - size // 2)
    caplog.set_level(logging.INFO, logger="lakelog.server.log")

    reopened = open_tablet(segment_max_bytes=2000)
    assert reopened.log_end_offset == reopened.high_watermark == 55
    assert reopened.segments[-1].size == active.size - size
    assert f"truncated {size - size // 2} bytes of a torn batch" in caplog.text
    assert "recovered shop.orders bucket 0:" in caplog.text and "offsets [0, 55)" in caplog.text
    assert reopened.append(make_batch(2)).base_offset == 55
    assert batches(reopened.read(55, 1 << 20).records)[0][:2] == (55, 2)


def test_garbage_after_the_last_batch_is_cut(open_tablet: OpenTablet, make_batch: MakeBatch) -> None:
    crashed = open_tablet()
    crashed.append(make_batch(3))
    crashed.append(make_batch(3))
    path = crashed.segments[-1].path
    good_size = path.stat().st_size
    with open(path, "ab") as file:
        file.write(os.urandom(HEADER_SIZE + 100))
    reopened = open_tablet()
    assert reopened.log_end_offset == 6 and path.stat().st_size == good_size
    assert reopened.append(make_batch(1)).base_offset == 6


def test_clean_shutdown_trusts_the_active_segment_a_crash_validates_it(
    tmp_path: Path, open_tablet: OpenTablet, make_batch: MakeBatch
) -> None:
    tablet = open_tablet()
    for _ in range(3):
        tablet.append(make_batch(4))
    tablet.close()
    marker = tmp_path / "bucket" / CLEAN_SHUTDOWN_FILE
    assert marker.exists()
    path = tablet.segments[-1].path
    flip_byte(path, path.stat().st_size - 3)  # inside the last batch's body: only a CRC check sees it

    trusting = open_tablet()
    assert not marker.exists()  # removed at open, so a crash from now on gets a full recovery
    assert trusting.log_end_offset == 12
    with pytest.raises(CorruptRecordError, match="offset 8"):
        trusting.read(8, 1 << 20)

    validating = open_tablet()  # `trusting` never closed: this open follows a crash
    assert validating.log_end_offset == 8
    # Offsets 8..11 had been acknowledged: reusing them would hand readers other data.
    with pytest.raises(LogFencedError, match="shop.orders bucket 0: the log recovered to offset 8 but offsets up to 12"):
        validating.append(make_batch(1))
    assert "offsets [8, 12)" in validating.accept_truncation()
    assert validating.append(make_batch(1)).base_offset == 8


def test_missing_index_files_are_rebuilt(
    open_tablet: OpenTablet, make_batch: MakeBatch, batches: Batches, clock
) -> None:
    tablet = open_tablet(segment_max_bytes=1500, index_interval_bytes=200)
    for i in range(20):
        clock.now = 10_000 + i
        tablet.append(make_batch(5))
    tablet.close()
    rolled = tablet.segments[0]
    entries = list(rolled.offset_index.entries)
    assert len(entries) > 1
    rolled.offset_index.path.unlink()
    rolled.time_index.path.unlink()
    tablet.segments[-1].offset_index.path.unlink()

    reopened = open_tablet(segment_max_bytes=1500, index_interval_bytes=200)
    assert reopened.log_end_offset == 100
    assert reopened.segments[0].offset_index.entries == entries
    assert rolled.offset_index.path.stat().st_size == 8 * len(entries)
    assert rolled.time_index.path.exists()
    assert batches(reopened.read(7, 1 << 20).records)[0][:2] == (5, 5)
    assert reopened.lookup_offset_by_timestamp(10_002) == 10


def test_corrupt_index_files_are_rebuilt(open_tablet: OpenTablet, make_batch: MakeBatch, batches: Batches) -> None:
    tablet = open_tablet(segment_max_bytes=1500, index_interval_bytes=200)
    for _ in range(20):
        tablet.append(make_batch(5))
    tablet.close()
    rolled = tablet.segments[1]
    entries = list(rolled.offset_index.entries)
    # Well-formed, ordered, and wrong: the second entry points into the middle of a batch.
    rolled.offset_index.path.write_bytes(OffsetIndex.ENTRY.pack(0, 0) + OffsetIndex.ENTRY.pack(5, 17))
    tablet.segments[2].time_index.path.write_bytes(b"\x01\x02\x03")

    reopened = open_tablet(segment_max_bytes=1500, index_interval_bytes=200)
    assert reopened.segments[1].offset_index.entries == entries
    assert reopened.segments[2].time_index.intact
    offset = rolled.base_offset + 7
    assert batches(reopened.read(offset, 1).records)[0][0] == rolled.base_offset + 5


def test_orphan_index_files_are_deleted(tmp_path: Path, open_tablet: OpenTablet, make_batch: MakeBatch) -> None:
    directory = tmp_path / "bucket"
    directory.mkdir()
    orphans = [directory / f"{123:020d}.index", directory / f"{123:020d}.timeindex"]
    for orphan in orphans:
        orphan.write_bytes(bytes(16))
    tablet = open_tablet()
    assert not any(orphan.exists() for orphan in orphans)
    assert tablet.append(make_batch(1)).base_offset == 0


def test_log_start_checkpoint_drops_segments_left_by_a_crash(
    tmp_path: Path, open_tablet: OpenTablet, make_batch: MakeBatch
) -> None:
    tablet = open_tablet(segment_max_bytes=1)
    for _ in range(4):
        tablet.append(make_batch(10))
    tablet.close()
    (tmp_path / "bucket" / LOG_START_OFFSET_FILE).write_text("20")  # as if the crash came before the unlinks

    reopened = open_tablet(segment_max_bytes=1)
    assert reopened.log_start_offset == 20
    assert [s.base_offset for s in reopened.segments] == [20, 30]
    assert not tablet.segments[0].path.exists() and not tablet.segments[1].path.exists()
