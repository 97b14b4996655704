"""How the read commands print: ``--output text`` for people, ``--output json`` (one document) for
scripts; and the words both share, so every command labels and counts the same way."""

from __future__ import annotations

import argparse
import json
from typing import Any


NONE_TEXT = "—"


def add_output_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output", choices=("text", "json"), default="text", help="text for people (default) or one JSON document for scripts"
    )


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2))


def offset_or_none(value: int) -> int | None:
    """An offset where -1 means "this tier is empty": None, which JSON prints as null."""
    return None if value < 0 else value


def offset_text(value: int) -> int | str:
    return NONE_TEXT if value < 0 else value
