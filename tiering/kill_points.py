"""Fault injection for the tiering job's kill tests: a test hook, not a feature.

``LAKELOG_TIERING_KILL_AT=after-write`` makes the job SIGKILL itself once a round's data files are
written and before the Iceberg commit; ``after-commit`` once the Iceberg commit landed and before
the coordinator is told (CommitLakeTableSnapshot). Unset, which is always the case outside tests,
nothing happens. A real SIGKILL is used so that no ``finally`` block or atexit handler can tidy up
what a crash would leave behind.
"""

from __future__ import annotations

import logging
import os
import signal

KILL_AT_ENV = "LAKELOG_TIERING_KILL_AT"
AFTER_WRITE = "after-write"
AFTER_COMMIT = "after-commit"

log = logging.getLogger(__name__)


def kill_point(name: str) -> None:
    """SIGKILL this process if ``$LAKELOG_TIERING_KILL_AT`` names this point."""
    if os.environ.get(KILL_AT_ENV) == name:
        log.warning("%s=%s: killing the tiering job now", KILL_AT_ENV, name)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os.kill(os.getpid(), signal.SIGKILL)
