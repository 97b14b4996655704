"""Recovery touches only the active segment's torn tail: a damaged rolled segment is
quarantined, never cut, and read by name; a log that comes back shorter than what it acknowledged
is fenced until the operator accepts the loss."""

from __future__ import annotations

import logging
import struct
from pathlib import Path
from typing import Callable

import pytest

from lakelog.errors import CorruptRecordError, LogFencedError
from lakelog.record.batch import iter_headers
from lakelog.server.log.log_loader import CLEAN_SHUTDOWN_FILE
from lakelog.server.log.log_tablet import LogTablet
from tests.harness.log_damage import damage_last_length

OpenTablet = Callable[..., LogTablet]
MakeBatch = Callable[..., bytes]
Batches = Callable[[bytes], list[tuple[int, int, int]]]
SMALL = {"segment_max_bytes": 1500, "index_interval_bytes": 200}


def filled(open_tablet: OpenTablet, make_batch: MakeBatch) -> LogTablet:
    tablet = open_tablet(**SMALL)
    for _ in range(20):
        tablet.append(make_batch(5))
    tablet.close()
    assert len(tablet.segments) >= 4
    return tablet


@pytest.mark.parametrize("crashed", [False, True], ids=["clean-stop", "crash"])
def test_damaged_rolled_segment_is_quarantined_not_cut_and_its_range_fails_by_name(
    tmp_path: Path, open_tablet: OpenTablet, make_batch: MakeBatch, batches: Batches, caplog: pytest.LogCaptureFixture, crashed: bool
) -> None:
    before = filled(open_tablet, make_batch)
    damaged, after = before.segments[1], before.segments[2]
    size = damaged.path.stat().st_size
    damage_last_length(damaged.path)
    if crashed:
        (tmp_path / "bucket" / CLEAN_SHUTDOWN_FILE).unlink()

    with caplog.at_level(logging.ERROR, logger="lakelog.server.log"):
        reopened = open_tablet(**SMALL)
    quarantined = damaged.path.with_name(damaged.path.name + ".quarantined")
    assert quarantined.stat().st_size == size, "set aside whole, never truncated"
    assert not damaged.path.exists()
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and str(quarantined) in errors[0] and "shop.orders bucket 0" in errors[0]
    assert [(hole.start, hole.end) for hole in reopened.quarantined] == [(damaged.base_offset, after.base_offset)]
    assert (reopened.log_start_offset, reopened.log_end_offset) == (0, 100)

    assert batches(reopened.read(0, 1 << 20).records)[0][0] == 0
    for offset in (damaged.base_offset, after.base_offset - 1):
        with pytest.raises(CorruptRecordError, match=rf"{quarantined}.*offset {offset} cannot be read locally"):
            reopened.read(offset, 1 << 20)
    assert batches(reopened.read(after.base_offset, 1 << 20).records)[0][0] == after.base_offset
    assert reopened.append(make_batch(5)).base_offset == 100
    reopened.close()

    again = open_tablet(**SMALL)  # the hole is found again from the files
    assert [(hole.start, hole.end) for hole in again.quarantined] == [(damaged.base_offset, after.base_offset)]
    assert again.delete_segments_before(after.base_offset) == 1
    assert again.quarantined == () and not quarantined.exists() and again.log_start_offset == after.base_offset


def test_damaged_first_segment_keeps_the_log_start_so_its_offsets_fail_by_name(
    open_tablet: OpenTablet, make_batch: MakeBatch
) -> None:
    before = filled(open_tablet, make_batch)
    damage_last_length(before.segments[0].path)
    reopened = open_tablet(**SMALL)
    assert reopened.log_start_offset == 0
    with pytest.raises(CorruptRecordError, match="offset 0 cannot be read locally"):
        reopened.read(0, 1 << 20)


def test_a_torn_tail_past_the_acknowledged_offset_is_cut_without_a_fence(
    tmp_path: Path, open_tablet: OpenTablet, make_batch: MakeBatch
) -> None:
    crashed = open_tablet()
    for _ in range(3):
        crashed.append(make_batch(4))
    crashed.checkpoint_acknowledged()  # the timer's checkpoint: 12
    with open(crashed.segments[-1].path, "ab") as file:  # a write the crash tore: never acknowledged
        file.write(make_batch(4)[:30])

    reopened = open_tablet()
    assert reopened.fence is None and reopened.log_end_offset == 12
    assert reopened.append(make_batch(1)).base_offset == 12


def test_lost_acknowledged_records_fence_the_bucket_across_restarts_until_accepted(
    tmp_path: Path, open_tablet: OpenTablet, make_batch: MakeBatch, caplog: pytest.LogCaptureFixture
) -> None:
    crashed = open_tablet()
    for _ in range(3):
        crashed.append(make_batch(4))
    crashed.checkpoint_acknowledged()
    path = crashed.segments[-1].path
    with open(path, "r+b") as file:  # media damage inside the last acknowledged batch
        file.seek(path.stat().st_size - 3)
        file.write(b"\x00\x01\x02")

    with caplog.at_level(logging.ERROR, logger="lakelog.server.log"):
        fenced = open_tablet()
    assert fenced.log_end_offset == 8 and "offsets up to 12 had been acknowledged" in caplog.text
    with pytest.raises(LogFencedError, match="shop.orders bucket 0.*--bucket 0 --accept-truncation"):
        fenced.append(make_batch(1))
    assert len(fenced.read(0, 1 << 20).records) > 0, "what survived stays readable"
    fenced.close()  # neither close nor the timer accept the loss

    still = open_tablet()
    with pytest.raises(LogFencedError):
        still.append(make_batch(1))
    assert still.accept_truncation().endswith("writes resume at offset 8")
    assert still.append(make_batch(1)).base_offset == 8
    still.close()
    assert open_tablet().fence is None


def test_a_rolled_segment_damaged_mid_file_is_quarantined_and_the_bucket_opens(
    open_tablet: OpenTablet, make_batch: MakeBatch, batches: Batches, caplog: pytest.LogCaptureFixture
) -> None:
    """The cheap check of a rolled segment reads its first batch and its tail; damage between is
    found when recovery replays the headers into the writers' state, and is quarantined like any
    other, never failing the whole bucket."""
    before = filled(open_tablet, make_batch)
    damaged, after = before.segments[1], before.segments[2]
    data = bytearray(damaged.path.read_bytes())
    second = [position for position, _ in iter_headers(data)][1]
    data[second + 8 : second + 12] = struct.pack(">i", 0x7FFF0000)
    damaged.path.write_bytes(bytes(data))

    with caplog.at_level(logging.ERROR, logger="lakelog.server.log"):
        reopened = open_tablet(**SMALL)
    quarantined = damaged.path.with_name(damaged.path.name + ".quarantined")
    assert any(str(quarantined) in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
    assert [(hole.start, hole.end) for hole in reopened.quarantined] == [(damaged.base_offset, after.base_offset)]
    assert batches(reopened.read(0, 1 << 20).records)[0][0] == 0
    assert batches(reopened.read(after.base_offset, 1 << 20).records)[0][0] == after.base_offset
    with pytest.raises(CorruptRecordError, match=f"offset {damaged.base_offset} cannot be read locally"):
        reopened.read(damaged.base_offset, 1 << 20)
    assert reopened.append(make_batch(5)).base_offset == 100
    reopened.close()


def test_two_neighbouring_damaged_segments_each_fail_by_their_own_file(open_tablet: OpenTablet, make_batch: MakeBatch) -> None:
    """Two rolled segments in a row set aside: a read names the file that holds its offset, not
    the first of the two (seed 15 of the random walk)."""
    before = filled(open_tablet, make_batch)
    first, second, after = before.segments[1], before.segments[2], before.segments[3]
    damage_last_length(first.path)
    damage_last_length(second.path)
    reopened = open_tablet(**SMALL)
    assert [(hole.start, hole.end) for hole in reopened.quarantined] == [
        (first.base_offset, second.base_offset), (second.base_offset, after.base_offset)
    ]
    for segment in (first, second):
        quarantined = segment.path.with_name(segment.path.name + ".quarantined")
        with pytest.raises(CorruptRecordError, match=rf"{quarantined}: .*offset {segment.base_offset} cannot be read locally"):
            reopened.read(segment.base_offset, 1 << 20)
    reopened.close()
