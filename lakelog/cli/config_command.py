"""`lakelog config`: every configuration key with its default and meaning."""

from __future__ import annotations

import argparse
from typing import Any

from lakelog.cli.output_format import NONE_TEXT, add_output_argument, print_json
from lakelog.config import OPTIONS, PASS_THROUGH_PREFIXES


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("config", help="List the configuration keys.", description=__doc__.splitlines()[0])
    add_output_argument(parser)
    parser.set_defaults(handler=_run)


def _pass_through_meaning(prefix: str) -> str:
    return f"passed through ({'PyIceberg catalog properties' if 'iceberg' in prefix else 'pyarrow file system settings'})"


def _run(args: argparse.Namespace) -> int:
    if args.output == "json":
        keys = [{"key": o.key, "default": o.default, "default_text": o.default_text, "description": o.description} for o in OPTIONS.values()]
        prefixes = [{"prefix": prefix, "description": _pass_through_meaning(prefix)} for prefix in PASS_THROUGH_PREFIXES]
        print_json({"keys": keys, "pass_through": prefixes})
        return 0
    for option in OPTIONS.values():
        print(f"{option.key:45} {option.default_text or NONE_TEXT:>12}  {option.description}")
    for prefix in PASS_THROUGH_PREFIXES:
        print(f"{prefix + '*':45} {'':>12}  {_pass_through_meaning(prefix)}")
    return 0
