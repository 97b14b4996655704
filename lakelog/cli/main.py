# PYTHON_ARGCOMPLETE_OK
"""`lakelog` (also `python -m lakelog`): servers, tables, produce, scan, offsets, groups, tiering, the demo.

Each command group lives in its own module with a ``register(subparsers)`` function that adds its
parser and sets ``handler``; this module only assembles them and turns errors into exit codes.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

import argcomplete

from lakelog.cli import (
    config_command,
    demo_command,
    group_command,
    health_command,
    lake_command,
    offsets_command,
    partition_command,
    produce_command,
    repair_command,
    scan_command,
    server_commands,
    spark_connect_command,
    table_commands,
    tier_command,
)
from lakelog.cli.missing_extra import missing_extra_message
from lakelog.errors import LakelogError
from lakelog.logging_config import LOG_LEVELS, configure_logging
from lakelog.version import __version__

COMMAND_MODULES = [
    server_commands, config_command, demo_command, table_commands, produce_command, scan_command, offsets_command, tier_command,
    health_command, repair_command, spark_connect_command, partition_command, lake_command, group_command,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lakelog", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"lakelog {__version__}")
    parser.add_argument(
        "--log-level", type=str.upper, choices=LOG_LEVELS, metavar="LEVEL",
        help=f"log level: {', '.join(LOG_LEVELS)} (default: $LAKELOG_LOG_LEVEL, else each command's own)",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argcomplete.autocomplete(parser)
    args = parser.parse_args(argv)
    if args.log_level:
        configure_logging(args.log_level)
    try:
        return int(args.handler(args) or 0)
    except LakelogError as error:
        print(f"lakelog: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as error:
        message = missing_extra_message(error)
        if message is None:
            raise
        print(message, file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `lakelog ... | head`: the reader left, which is not an error; keep Python quiet at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
