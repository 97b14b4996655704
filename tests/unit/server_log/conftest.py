"""Fixtures of the local log tests: real files under tmp_path, batches encoded as a client would."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pyarrow as pa
import pytest

from lakelog.record.batch import encode_batch, iter_headers
from lakelog.server.log.log_tablet import LogConfig, LogTablet
from tests.harness.clocks import FakeClock


def _make_batch(rows: int, first: int = 0) -> bytes:
    return encode_batch(pa.record_batch({"id": pa.array(range(first, first + rows), pa.int64())}), schema_id=1)


def _batches(records: bytes) -> list[tuple[int, int, int]]:
    return [(h.base_offset, h.record_count, h.commit_timestamp) for _, h in iter_headers(records)]


@pytest.fixture
def make_batch() -> Callable[..., bytes]:
    """``make_batch(rows, first=0)``: a client-encoded batch (base offset 0, timestamp -1)."""
    return _make_batch


@pytest.fixture
def batches() -> Callable[[bytes], list[tuple[int, int, int]]]:
    """``batches(records)``: ``(base_offset, record_count, commit_timestamp)`` of each batch."""
    return _batches


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_tablet(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[..., LogTablet]]:
    """``open_tablet(directory="bucket", name=..., **LogConfig fields)`` on the test's clock.

    A test that "crashes" simply stops using a tablet and opens the directory again; every tablet
    opened here is closed at teardown.
    """
    opened: list[LogTablet] = []

    def open_(directory: str = "bucket", *, name: str = "shop.orders bucket 0", **config: int | str) -> LogTablet:
        log_config = LogConfig(**config)  # type: ignore[arg-type]
        tablet = LogTablet.open(tmp_path / directory, log_config, 0, name, clock=clock)
        opened.append(tablet)
        return tablet

    yield open_
    for tablet in opened:
        tablet.close()
