"""``read_offset_range``: what the tiering job and the Spark reader rely on to take exactly their
range from a scanner. A real scanner returns a bucket in order without gaps; these polls are what a
broken one would return, so they are scripted."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
import pytest

import lakelog
from lakelog.client.scanner.offset_range import read_offset_range
from lakelog.errors import CorruptRecordError

PATH = lakelog.TablePath("shop", "orders")


class ScriptedScanner:
    """Answers each poll with the next list of offsets."""

    def __init__(self, polls: list[list[int]]) -> None:
        self._polls: Iterator[list[int]] = iter(polls)
        self.subscribed: tuple[int, int] | None = None

    def subscribe(self, bucket: int, offset: int) -> None:
        self.subscribed = (bucket, offset)

    def poll_arrow(self, timeout_ms: int) -> pa.Table:
        return pa.table({"__offset": pa.array(next(self._polls), pa.int64())})


def _read(polls: list[list[int]], start: int, end: int) -> list[int]:
    scanner = ScriptedScanner(polls)
    tables = list(read_offset_range(scanner, PATH, 3, start, end))  # type: ignore[arg-type]
    assert scanner.subscribed == (3, start)
    return [offset for table in tables for offset in table.column("__offset").to_pylist()]


def test_the_range_is_read_exactly_and_cut_at_its_end() -> None:
    assert _read([[5, 6, 7], [], [8, 9, 10, 11]], 5, 10) == [5, 6, 7, 8, 9]


@pytest.mark.parametrize(
    "polls",
    [[[5, 6], [8, 9]], [[5, 6], [6, 7]], [[5, 7, 6]], [[6, 7]]],
    ids=["a gap", "a duplicate", "out of order", "not at the start"],
)
def test_a_broken_poll_is_a_corrupt_record_error_naming_the_bucket(polls: list[list[int]]) -> None:
    with pytest.raises(CorruptRecordError, match="shop.orders bucket 3: expected offsets from"):
        _read(polls, 5, 10)
