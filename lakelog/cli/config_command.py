"""`lakelog config`: every configuration key with its default and meaning."""

from __future__ import annotations

import argparse
from typing import Any

from lakelog.config import OPTIONS, PASS_THROUGH_PREFIXES


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("config", help="List the configuration keys.")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    for option in OPTIONS.values():
        print(f"{option.key:45} {option.default!s:>12}  {option.description}")
    for prefix in PASS_THROUGH_PREFIXES:
        print(f"{prefix + '*':45} {'':>12}  passed through ({'PyIceberg catalog properties' if 'iceberg' in prefix else 'pyarrow file system settings'})")
    return 0
