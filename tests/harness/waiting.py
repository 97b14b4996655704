"""Waiting for what happens on another thread or process, with a bound and a name for the failure."""

from __future__ import annotations

import time
from typing import Any, Callable


def wait_until(condition: Callable[[], Any], what: str, timeout_s: float = 60.0) -> Any:
    """Poll ``condition`` until it gives something true, and return that; fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)
    return result
