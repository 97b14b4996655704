"""The server's allocator setting (server/allocator.py): with it, an answer-sized buffer freed and
allocated again reuses the heap's pages instead of faulting fresh ones in from the kernel."""

from __future__ import annotations

import resource

from lakelog.config import Configuration
from lakelog.server.allocator import keep_buffers_on_heap

ANSWER = 16 << 20  # a fetch answer of client.scanner.fetch.max-bytes


def _page_faults_of_answers(count: int) -> int:
    """Minor page faults while ``count`` answer-sized buffers are filled and freed one by one."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(count):
        buffer = b"\x01" * ANSWER  # written: every page touched (bytes(n) would map zero pages lazily)
        del buffer
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_answer_buffers_are_reused_with_the_default_threshold_and_faulted_in_without() -> None:
    assert not keep_buffers_on_heap(0), "0 leaves the allocator alone"
    small = 128 << 10  # glibc's thresholds at start: every answer mapped anew and given back
    try:
        assert keep_buffers_on_heap(small)
        untuned = _page_faults_of_answers(10)
    finally:
        assert keep_buffers_on_heap(Configuration({}).get("server.malloc.mmap-threshold"))
    tuned = _page_faults_of_answers(10)
    pages = 10 * ANSWER // resource.getpagesize()
    assert untuned > pages / 2, f"{untuned} faults for {pages} pages of fresh answers"
    assert tuned < pages / 5, f"{tuned} faults for {pages} pages: the answers' memory was not reused"
