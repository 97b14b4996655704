"""`lakelog partition list|create|drop`: the partitions of a partitioned table.

A partition is given as its name (``2026-11-23``; with several partition keys the values joined by
``$`` in key order) or as ``KEY=VALUE`` pairs (``--spec dt=2026-11-23``).
"""

from __future__ import annotations

import argparse
from typing import Any

from lakelog.cli.common_args import add_connection_arguments, add_table_argument, open_connection, table_path
from lakelog.cli.output_format import add_output_argument, print_json
from lakelog.cli.text_table import render_table
from lakelog.client.connection import Connection
from lakelog.config import key_value_pairs
from lakelog.errors import InvalidPartitionError
from lakelog.metadata import TablePath, partition_spec


def register(subparsers: Any) -> None:
    group = subparsers.add_parser("partition", help="List, create and drop partitions.", description=__doc__.splitlines()[0])
    commands = group.add_subparsers(dest="partition_command", required=True, metavar="ACTION")

    listing = commands.add_parser("list", help="Every partition of a table: id and name.")
    add_table_argument(listing)
    add_output_argument(listing)
    listing.set_defaults(handler=_list)

    create = commands.add_parser("create", help="Create a partition.")
    drop = commands.add_parser("drop", help="Drop a partition and its log (the lake keeps what it holds).")
    for parser in (create, drop):
        add_table_argument(parser)
        parser.add_argument("partition", nargs="?", metavar="NAME", help="the partition's name, e.g. 2026-11-23")
        parser.add_argument("--spec", action="append", default=[], metavar="KEY=VALUE", help="a partition key's value (repeatable)")
    create.add_argument("--if-not-exists", action="store_true", help="succeed when the partition already exists")
    create.set_defaults(handler=_create)
    drop.add_argument("--if-exists", action="store_true", help="succeed when the partition does not exist")
    drop.set_defaults(handler=_drop)

    for parser in (listing, create, drop):
        add_connection_arguments(parser)


def _spec(args: argparse.Namespace, conn: Connection, path: TablePath) -> dict[str, str]:
    if bool(args.partition) == bool(args.spec):
        raise InvalidPartitionError("give the partition either as NAME or as --spec KEY=VALUE pairs")
    info = conn.admin.get_table_info(path)
    if args.partition:
        return partition_spec(info.partition_keys, args.partition)
    return key_value_pairs(args.spec, "--spec", InvalidPartitionError)


def _create(args: argparse.Namespace) -> int:
    path = table_path(args)
    with open_connection(args) as conn:
        spec = _spec(args, conn, path)
        partition_id = conn.admin.create_partition(path, spec, ignore_if_exists=args.if_not_exists)
    print(f"created partition {_name(spec)} of {path} (id {partition_id})")
    return 0


def _drop(args: argparse.Namespace) -> int:
    path = table_path(args)
    with open_connection(args) as conn:
        spec = _spec(args, conn, path)
        conn.admin.drop_partition(path, spec, ignore_if_not_exists=args.if_exists)
    print(f"dropped partition {_name(spec)} of {path}")
    return 0


def _list(args: argparse.Namespace) -> int:
    with open_connection(args) as conn:
        partitions = conn.admin.list_partition_infos(table_path(args))
    # A lake-only partition was dropped from the log of a lake-enabled table; the lake still holds it.
    if args.output == "json":
        print_json([{"partition_id": p.partition_id, "partition_name": p.partition_name, "lake_only": p.lake_only} for p in partitions])
    else:
        rows = [(p.partition_id, p.partition_name, "lake only" if p.lake_only else "log") for p in partitions]
        print(render_table(("partition_id", "partition_name", "held by"), rows))
    return 0


def _name(spec: dict[str, str]) -> str:
    return ", ".join(f"{key}={value}" for key, value in spec.items())
