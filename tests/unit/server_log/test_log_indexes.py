"""The sparse offset and time indexes: lookups, truncation, reload and detection of broken files."""

from __future__ import annotations

from pathlib import Path

from lakelog.server.log.offset_index import OffsetIndex
from lakelog.server.log.time_index import TimeIndex


def test_offset_index_lookup_append_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100)
    assert index.lookup(150) == 0
    for offset, position in [(100, 0), (110, 4096), (130, 8200)]:
        index.append(offset, position)
    assert [index.lookup(o) for o in (100, 109, 110, 129, 130, 10_000)] == [0, 0, 4096, 4096, 8200, 8200]
    assert path.stat().st_size == 3 * 8
    index.close()

    reloaded = OffsetIndex(path, 100)
    assert reloaded.intact and reloaded.entries == [(0, 0), (10, 4096), (30, 8200)]
    assert reloaded.last_entry() == (130, 8200)
    reloaded.truncate_to(110)
    assert reloaded.entries == [(0, 0)] and path.stat().st_size == 8
    reloaded.close()


def test_offset_index_with_torn_or_unordered_file_is_not_intact(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0)
    index.append(0, 0)
    index.append(5, 100)
    index.close()
    with open(path, "ab") as file:
        file.write(b"\x00\x01\x02")
    torn = OffsetIndex(path, 0)
    assert not torn.intact and torn.entries == []
    torn.close()

    path.write_bytes((5).to_bytes(4, "big") + (100).to_bytes(4, "big") + bytes(8))
    unordered = OffsetIndex(path, 0)
    assert not unordered.intact
    unordered.truncate_to(0)
    assert unordered.intact and path.stat().st_size == 0
    unordered.close()


def test_time_index_lookup_gives_last_entry_older_than_timestamp(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000010.timeindex"
    index = TimeIndex(path, 10)
    for timestamp, offset in [(1000, 10), (2000, 20), (2000, 30), (3000, 40)]:
        index.append(timestamp, offset)
    assert index.lookup(500) == 10  # before everything: scan from the segment's base
    assert index.lookup(1000) == 10  # no entry is older than 1000
    assert index.lookup(1001) == 10
    assert index.lookup(2000) == 10  # both 2000 entries may hold the first match: start before them
    assert index.lookup(2500) == 30
    assert index.lookup(9999) == 40
    index.close()

    reloaded = TimeIndex(path, 10)
    assert reloaded.intact and reloaded.last_entry() == (3000, 40)
    reloaded.truncate_to(30)
    assert reloaded.entries == [(1000, 0), (2000, 10)]
    reloaded.close()


def test_time_index_going_back_in_time_is_not_intact(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(TimeIndex.ENTRY.pack(2000, 0) + TimeIndex.ENTRY.pack(1000, 5))
    index = TimeIndex(path, 0)
    assert not index.intact and index.entries == []
    index.close()
