"""The memory benchmark's account of where a client's RSS is (bench/memory_client.py): the report
names mimalloc's arenas, other anonymous memory and files from it, so each must land in its kind."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from bench.memory_client import ResidentMemory

MB = 1 << 20


def test_arrow_buffers_count_in_the_arena_and_other_memory_apart() -> None:
    # Freed memory the pool still holds (earlier tests') would take the buffer without growing RSS.
    pa.default_memory_pool().release_unused()
    before = ResidentMemory.now()
    arrow = pa.allocate_buffer(200 * MB)
    np.frombuffer(arrow, np.uint8)[:] = 1  # resident once written
    other = np.ones(150 * MB, np.uint8)  # numpy's own allocation: glibc, not Arrow's pool
    after = ResidentMemory.now()

    assert after.arena_mb - before.arena_mb >= 195
    assert after.arrow_allocated_mb - before.arrow_allocated_mb >= 199
    assert after.other_anonymous_mb - before.other_anonymous_mb >= 145
    assert abs(after.files_mb - before.files_mb) < 20
    del arrow, other
