"""The one logging setup of every lakelog process: one line per event, at INFO by default."""

from __future__ import annotations

import logging
import os

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def configure_logging(level: str | None = None) -> None:
    """The first call wins, so ``lakelog --log-level``, applied before the command runs, beats the
    command's own default."""
    logging.basicConfig(level=(level or os.environ.get("LAKELOG_LOG_LEVEL", "INFO")).upper(), format=FORMAT)
