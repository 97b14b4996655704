"""LogSegment on its own: appends of stamped batches, index entries, positioned reads, recovery."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest

from lakelog.errors import CorruptRecordError
from lakelog.record.batch import HEADER_SIZE, iter_headers, read_header, stamp
from lakelog.server.log.segment import LogSegment


def stamped(make_batch: Callable[..., bytes], base_offset: int, rows: int, timestamp: int) -> bytes:
    buffer = bytearray(make_batch(rows))
    stamp(buffer, 0, base_offset, timestamp)
    return bytes(buffer)


@pytest.fixture
def segment(tmp_path: Path, make_batch: Callable[..., bytes]) -> LogSegment:
    """A segment at base 100 holding ten batches of 4 records, timestamps 1000, 1010, ..., 1090."""
    segment = LogSegment(tmp_path, 100, index_interval_bytes=1000)
    for i in range(10):
        segment.append(stamped(make_batch, 100 + 4 * i, 4, 1000 + 10 * i))
    return segment


def test_append_tracks_offsets_timestamps_and_sparse_index(segment: LogSegment) -> None:
    assert segment.path.name == "00000000000000000100.log"
    assert (segment.next_offset, segment.first_timestamp, segment.max_timestamp) == (140, 1000, 1090)
    assert segment.size == segment.path.stat().st_size
    batch_size = segment.size // 10
    entries = segment.offset_index.entries
    assert entries[0] == (0, 0)  # always an entry for the first batch
    assert 1 < len(entries) < 10  # then one per ~1000 bytes, not one per batch
    assert all(position % batch_size == 0 for _, position in entries)
    assert [offset for _, offset in segment.time_index.entries] == [relative for relative, _ in entries]


def test_find_position_returns_the_batch_containing_the_offset(segment: LogSegment) -> None:
    batch_size = segment.size // 10
    for offset in (100, 103, 117, 139):
        found = segment.find_position(offset)
        assert found is not None
        position, header = found
        assert header.base_offset <= offset < header.next_offset
        assert position == (header.base_offset - 100) // 4 * batch_size
    assert segment.find_position(140) is None


def test_read_returns_whole_batches_within_budget_and_at_least_one(segment: LogSegment) -> None:
    batch_size = segment.size // 10
    data = segment.read(batch_size, 3 * batch_size - 1, segment.size)
    assert [h.base_offset for _, h in iter_headers(data)] == [104, 108] and len(data) == 2 * batch_size
    data = segment.read(0, 10, segment.size)  # smaller than one batch: that batch anyway
    assert [h.base_offset for _, h in iter_headers(data)] == [100] and len(data) == batch_size
    data = segment.read(0, 1 << 20, 4 * batch_size)  # never past max_position
    assert [h.base_offset for _, h in iter_headers(data)] == [100, 104, 108, 112]


def test_find_offset_by_timestamp(segment: LogSegment) -> None:
    assert segment.find_offset_by_timestamp(0, segment.size) == 100
    assert segment.find_offset_by_timestamp(1040, segment.size) == 116
    assert segment.find_offset_by_timestamp(1041, segment.size) == 120
    assert segment.find_offset_by_timestamp(1091, segment.size) is None
    assert segment.find_offset_by_timestamp(1050, segment.size // 2) is None  # bounded by max_position


def test_recover_cuts_a_torn_tail_and_rebuilds_indexes(segment: LogSegment, tmp_path: Path) -> None:
    batch_size = segment.size // 10
    segment.close()
    with open(segment.path, "r+b") as file:
        file.truncate(7 * batch_size + 20)
    segment.offset_index.path.write_bytes(b"garbage")
    reopened = LogSegment(tmp_path, 100, index_interval_bytes=1000)
    assert reopened.sanity_check() == 20
    assert (reopened.next_offset, reopened.size, reopened.max_timestamp) == (128, 7 * batch_size, 1060)
    assert reopened.offset_index.intact and reopened.offset_index.entries[0] == (0, 0)
    assert reopened.recover() == 0
    reopened.close()


def test_recover_stops_at_a_batch_that_breaks_offset_order(tmp_path: Path, make_batch: Callable[..., bytes]) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=1)
    segment.append(stamped(make_batch, 0, 2, 10))
    segment.append(stamped(make_batch, 2, 2, 20))
    segment.append(stamped(make_batch, 7, 2, 30))  # a gap: the server never writes this
    batch_size = segment.size // 3
    assert segment.recover() == batch_size
    assert segment.next_offset == 4 and segment.size == 2 * batch_size == segment.path.stat().st_size
    assert len(segment.offset_index.entries) == 2
    segment.close()


def test_read_of_a_flipped_byte_names_file_position_and_offset(segment: LogSegment, tmp_path: Path) -> None:
    """Damage done at rest: the segment is found on disk (as at startup), so its first read checks
    every batch. (Batches this process appended passed their CRC check on the way in and are
    trusted, as Kafka's broker does; the client checks every batch again.)"""
    batch_size = segment.size // 10
    segment.flush()
    segment.close()
    fd = os.open(segment.path, os.O_RDWR)
    try:
        position = 3 * batch_size + batch_size - 5
        os.pwrite(fd, bytes([os.pread(fd, 1, position)[0] ^ 0xFF]), position)
    finally:
        os.close(fd)
    reopened = LogSegment(tmp_path, 100, index_interval_bytes=1000)
    assert reopened.sanity_check() == 0, "the cheap startup check reads headers only"
    assert reopened.read(0, 3 * batch_size, reopened.size), "the batches before the damage read fine"
    with pytest.raises(CorruptRecordError) as raised:
        reopened.read(3 * batch_size, 1 << 20, reopened.size)
    message = str(raised.value)
    assert str(reopened.path) in message and f"byte {3 * batch_size}" in message and "offset 112" in message
    reopened.close()


def test_sanity_check_trusts_intact_files(segment: LogSegment, tmp_path: Path) -> None:
    segment.flush()
    segment.close()
    reopened = LogSegment(tmp_path, 100, index_interval_bytes=1000)
    assert reopened.sanity_check() == 0
    assert (reopened.next_offset, reopened.first_timestamp, reopened.max_timestamp) == (140, 1000, 1090)
    assert reopened.offset_index.entries == segment.offset_index.entries
    reopened.close()


def flip(path: Path, position: int) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, bytes([os.pread(fd, 1, position)[0] ^ 0x01]), position)
    finally:
        os.close(fd)


def test_a_flipped_base_offset_is_named_as_a_damaged_header_not_served(segment: LogSegment) -> None:
    """The base offset is stamped by the server, outside the CRC: reads check offsets continue."""
    batch_size = segment.size // 10
    flip(segment.path, 4 * batch_size + 7)  # the low byte of batch 4's base offset: 116 -> 117
    with pytest.raises(CorruptRecordError, match=rf"{segment.path} at byte {4 * batch_size}: batch offset 117, expected 116"):
        segment.read(3 * batch_size, 1 << 20, segment.size)
    with pytest.raises(CorruptRecordError, match="do not hold offset 116"):
        segment.read(4 * batch_size, 1 << 20, segment.size, holding=116)
    assert segment.read(0, 4 * batch_size, segment.size, holding=100)  # the batches before it still serve
    with pytest.raises(CorruptRecordError, match="batch offset 117, expected 116"):
        segment.verify()
    segment.close()


def test_verify_names_the_first_crc_mismatch(segment: LogSegment) -> None:
    segment.verify()
    batch_size = segment.size // 10
    flip(segment.path, 7 * batch_size + batch_size - 3)
    with pytest.raises(CorruptRecordError, match=rf"{segment.path} at byte {7 * batch_size}: CRC mismatch in batch at offset 128"):
        segment.verify(chunk_bytes=batch_size)
    segment.close()


@pytest.mark.parametrize("most_per_write", [None, 1000], ids=["whole-writes", "short-writes"])
def test_gathered_appends_of_more_pieces_than_one_write_takes_land_whole(
    tmp_path: Path, make_batch: Callable[..., bytes], monkeypatch: pytest.MonkeyPatch, most_per_write: int | None
) -> None:
    """The log appends a request as stamped headers and received bodies, two pieces a batch; more
    than IOV_MAX pieces, or a write the kernel cuts short, still land as the bytes in order."""
    batches = [stamped(make_batch, 3 * i, 3, 100 + i) for i in range(700)]
    pieces = [piece for batch in batches for piece in (batch[:HEADER_SIZE], memoryview(batch)[HEADER_SIZE:])]
    if most_per_write is not None:
        real = os.pwritev
        monkeypatch.setattr(os, "pwritev", lambda fd, views, at: real(fd, [bytes(b"".join(views)[:most_per_write])], at))
    segment = LogSegment(tmp_path, 0, index_interval_bytes=1)
    segment.append_batches(pieces, [header for batch in batches for _, header in iter_headers(batch)])
    assert segment.path.read_bytes() == b"".join(batches)
    assert (segment.size, segment.next_offset, segment.max_timestamp) == (len(b"".join(batches)), 2100, 799)
    assert segment.find_position(1500) == (500 * len(batches[0]), read_header(batches[500]))
    segment.close()
