"""Fault injection for the tiering job's kill tests: a test hook, not a feature.

``LAKELOG_TIERING_KILL_AT=after-write`` makes the job SIGKILL itself once a round's data files are
written and before the Iceberg commit; ``after-commit`` once the Iceberg commit landed and before
the coordinator is told (CommitLakeTableSnapshot). Unset, which is always the case outside tests,
nothing happens.

The lake maintenance jobs have theirs: ``compact-after-write`` once a compaction's files are written
and before its Iceberg commit, ``compact-after-commit`` once it committed and before the
coordinator is told, ``expire-after-commit`` once an expiry removed the snapshots from the table's
metadata and before it deletes the files they alone referenced.

A real SIGKILL is used so that no ``finally`` block or atexit handler can tidy up what a crash
would leave behind.
"""

from __future__ import annotations

import logging
import os
import signal

KILL_AT_ENV = "LAKELOG_TIERING_KILL_AT"
AFTER_WRITE = "after-write"
AFTER_COMMIT = "after-commit"
COMPACT_AFTER_WRITE = "compact-after-write"
COMPACT_AFTER_COMMIT = "compact-after-commit"
EXPIRE_AFTER_COMMIT = "expire-after-commit"

log = logging.getLogger(__name__)


def kill_point(name: str) -> None:
    """SIGKILL this process if ``$LAKELOG_TIERING_KILL_AT`` names this point."""
    if os.environ.get(KILL_AT_ENV) == name:
        log.warning("%s=%s: killing the job now", KILL_AT_ENV, name)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os.kill(os.getpid(), signal.SIGKILL)
