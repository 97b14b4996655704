"""glibc's malloc told to keep a server's answer-sized buffers, instead of asking the kernel anew.

glibc serves an allocation above its mmap threshold (128 kB at start, raised by each free of a
bigger one) with fresh pages mapped for it, and returns freed memory above its trim threshold to
the kernel: a tablet server that builds a FetchLog answer of megabytes, and gRPC's copy of it, had
every page of both faulted in and zeroed by the kernel again, fetch after fetch. That was a third
of a local read's time (bench/, the local-tier benchmark: 0.9 s for 401 MB, 0.62 s with the
thresholds fixed). Fixed thresholds keep buffers up to ``server.malloc.mmap-threshold`` on the
heap and up to twice that freed at its top for the next answer, at the cost of the memory kept.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

# mallopt's parameter numbers (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_buffers_on_heap(threshold: int) -> bool:
    """Fix the mmap threshold at ``threshold`` bytes and the trim threshold at twice that (0: leave
    the allocator alone). False where the C library has no mallopt or refuses the value."""
    if threshold <= 0:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        log.info("server.malloc.mmap-threshold ignored: this C library has no mallopt")
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    if not (mallopt(_M_MMAP_THRESHOLD, threshold) and mallopt(_M_TRIM_THRESHOLD, 2 * threshold)):
        log.warning("server.malloc.mmap-threshold %d refused by the C library: its own thresholds apply", threshold)
        return False
    return True
