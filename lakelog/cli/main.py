"""`lakelog` (also `python -m lakelog`): servers, tables, produce, scan, offsets, tiering, the demo.

Each command group lives in its own module with a ``register(subparsers)`` function that adds its
parser and sets ``handler``; this module only assembles them and turns errors into exit codes.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from lakelog.cli import (
    config_command,
    demo_command,
    offsets_command,
    produce_command,
    scan_command,
    server_commands,
    spark_connect_command,
    table_commands,
    tier_command,
)
from lakelog.errors import LakelogError

COMMAND_MODULES = [server_commands, config_command, demo_command, table_commands, produce_command, scan_command, offsets_command, tier_command, spark_connect_command]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lakelog", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except LakelogError as error:
        print(f"lakelog: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
