"""What every data command shares: which cluster to reach, with which client settings, and the
arguments that name a table, buckets and timestamps.

Kept in one place so ``table``, ``produce``, ``scan`` and ``offsets`` take the same flags, honour
the same ``LAKELOG_BOOTSTRAP`` variable and report a bad value the same way.
"""

from __future__ import annotations

import argparse
import os
from datetime import datetime, timezone

from lakelog.client.connection import Connection, connect
from lakelog.config import Configuration
from lakelog.metadata import TablePath

DEFAULT_BOOTSTRAP = "127.0.0.1:9123"
BOOTSTRAP_ENV = "LAKELOG_BOOTSTRAP"
CONFIG_ENV = "LAKELOG_CONFIG"


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap",
        metavar="HOST:PORT",
        help=f"coordinator to connect to (default: ${BOOTSTRAP_ENV}, else {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--config", metavar="FILE",
        help=f"YAML file of client configuration keys (keeps a token out of the process list; default: ${CONFIG_ENV})",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="client configuration key (repeatable; beats --config)"
    )


def add_table_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", metavar="DB.TABLE", help="the table")


def add_bucket_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bucket", action="append", type=int, metavar="B", help="only this bucket (repeatable; default: every bucket)"
    )


def add_partition_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partition", metavar="NAME", help="the partition (partitioned tables; `lakelog partition list` names them)")


def bootstrap_address(args: argparse.Namespace) -> str:
    """The flag beats the environment, which beats the default, as for the servers' own settings."""
    return args.bootstrap or os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP


def client_configuration(args: argparse.Namespace) -> Configuration:
    """The ``--config`` file (else ``$LAKELOG_CONFIG``) under the ``--set`` keys, validated up front
    so a typo fails before any RPC."""
    return Configuration.load(args.config or os.environ.get(CONFIG_ENV), args.set)


def open_connection(args: argparse.Namespace) -> Connection:
    return connect(bootstrap_address(args), client_configuration(args).items())


def table_path(args: argparse.Namespace) -> TablePath:
    """Parsed in the handler, not by argparse, so a bad name is a LakelogError (exit 1) like the rest."""
    return TablePath.parse(args.table)


def timestamp_ms(text: str) -> int:
    """An argparse type: milliseconds since the epoch, or an ISO 8601 time (UTC unless it says)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither milliseconds since the epoch nor an ISO 8601 time (e.g. 2024-05-01T12:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)
