"""The open files a server process may hold, and how many buckets fit in them.

A tablet server keeps every segment of a bucket it leads open: three files each (the log, its
offset index and its time index), for the active segment and for the rolled ones kept locally
(``table.log.tiered.local-segments``, 2 by default). Past the process's open-file limit a bucket
can no longer be opened, and the server cannot lead it: so the coordinator places no more buckets
on a tablet server than fit (``coordinator.max-buckets-per-tablet-server``), and refuses a table
beyond that rather than answer OK for a table nobody can write (and undoes one whose leader still
cannot open it).
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)

# Three files per segment; the active segment and two rolled ones kept locally.
FILES_PER_BUCKET = 3 * 3
# Most files a soft limit is raised to when the hard limit is unlimited.
UNLIMITED_FILES = 1 << 20
# Files kept for everything but buckets: client connections, remote and lake files, the metadata store.
MIN_RESERVED_FILES = 256


def raise_open_file_limit() -> None:
    """Raise the soft limit on open files to the hard one, as servers that keep many files open do."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = UNLIMITED_FILES if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            log.info("open-file limit raised from %d to %d", soft, target)
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, target, exc)


def open_file_limit() -> int:
    """The soft limit on open files in force."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return UNLIMITED_FILES if soft == resource.RLIM_INFINITY else soft


def buckets_within(open_files: int) -> int:
    """Buckets whose files fit in ``open_files``, a quarter of it (at least ``MIN_RESERVED_FILES``)
    kept for everything else."""
    reserved = max(MIN_RESERVED_FILES, open_files // 4)
    return max(0, open_files - reserved) // FILES_PER_BUCKET
