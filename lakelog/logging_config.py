"""The one logging setup of every lakelog process: one line per event, at INFO by default."""

from __future__ import annotations

import logging
import os

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str | None = None) -> None:
    logging.basicConfig(level=(level or os.environ.get("LAKELOG_LOG_LEVEL", "INFO")).upper(), format=FORMAT)
