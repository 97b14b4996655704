"""`lakelog table create|list|describe|alter|drop`: manage tables without writing Python.

``create`` makes the database as well when it is missing: a database is only a namespace here, and
making users run a second command first would add nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from lakelog.cli.common_args import add_connection_arguments, add_partition_argument, add_table_argument, open_connection, table_path
from lakelog.cli.output_format import NONE_TEXT, add_output_argument, offset_or_none, offset_text, print_json
from lakelog.progress import counted
from lakelog.cli.schema_text import format_schema, format_type, parse_schema
from lakelog.cli.text_table import render_table
from lakelog.cli.tier_bars import LEGEND, bucket_lines
from lakelog.config import key_value_pairs
from lakelog.errors import InvalidAlterTableError, InvalidTableError
from lakelog.metadata import BucketInfo, TableChange, TableDescriptor, TableInfo

_BUCKET_HEADER = (
    "bucket", "leader", "high_watermark", "local_start",
    "remote_start", "remote_end", "lake_start", "lake_end", "replicas", "isr", "leader_epoch",
)
# BucketInfo's fields that are not offsets (the replica fields are shown as lists).
_NOT_OFFSETS = ("leader_available", "remote_error", "replicas", "isr", "leader_epoch")


def register(subparsers: Any) -> None:
    group = subparsers.add_parser("table", help="Create, list, describe and drop tables.", description=__doc__.splitlines()[0])
    commands = group.add_subparsers(dest="table_command", required=True, metavar="ACTION")

    create = commands.add_parser("create", help="Create a table (and its database when missing).")
    add_table_argument(create)
    create.add_argument(
        "--schema", required=True, metavar="NAME:TYPE,...",
        help="columns, e.g. 'id:int64,name:string,amount:decimal(10,2),ts:timestamp[ms, tz=UTC]'",
    )
    create.add_argument("--buckets", type=int, default=1, metavar="N", help="number of buckets (default 1)")
    create.add_argument("--property", action="append", default=[], metavar="KEY=VALUE", help="table property (repeatable)")
    create.add_argument(
        "--bucket-key", action="append", default=[], metavar="COLUMN",
        help="rows with equal values of these columns go to one bucket (repeatable, in key order)",
    )
    create.add_argument(
        "--partition-key", action="append", default=[], metavar="COLUMN",
        help="partition the table by this string column (repeatable, in key order)",
    )
    create.add_argument("--comment", default="", help="free text kept with the table")
    create.add_argument("--if-not-exists", action="store_true", help="succeed when the table already exists")
    create.set_defaults(handler=_create)

    listing = commands.add_parser("list", help="List tables as DB.TABLE lines.")
    listing.add_argument("database", nargs="?", metavar="DB", help="only this database (default: every database)")
    add_output_argument(listing)
    listing.set_defaults(handler=_list)

    describe = commands.add_parser("describe", help="Schema, buckets, properties and where each bucket's log lives.")
    add_table_argument(describe)
    add_partition_argument(describe)
    add_output_argument(describe)
    describe.set_defaults(handler=_describe)

    alter = commands.add_parser("alter", help="Add nullable columns (last) or widen columns: a new schema version.")
    add_table_argument(alter)
    alter.add_argument("--add-column", action="append", default=[], metavar="NAME:TYPE", help="add a nullable column last (repeatable)")
    alter.add_argument("--widen-column", action="append", default=[], metavar="NAME:TYPE", help="widen a column: int8->int16->int32->int64, float32->float64 (repeatable)")
    alter.add_argument("--comment", default="", help="comment of the added column (with one --add-column)")
    alter.set_defaults(handler=_alter)

    drop = commands.add_parser("drop", help="Drop a table and its log.")
    add_table_argument(drop)
    drop.add_argument("--if-exists", action="store_true", help="succeed when the table does not exist")
    drop.set_defaults(handler=_drop)

    for parser in (create, listing, describe, alter, drop):
        add_connection_arguments(parser)


def _create(args: argparse.Namespace) -> int:
    path = table_path(args)
    descriptor = TableDescriptor(
        parse_schema(args.schema), args.buckets, key_value_pairs(args.property, "--property", InvalidTableError), args.comment, args.bucket_key, args.partition_key
    )
    descriptor.validate()
    with open_connection(args) as conn:
        conn.admin.create_database(path.database, ignore_if_exists=True)
        table_id = conn.admin.create_table(path, descriptor, ignore_if_exists=args.if_not_exists)
    print(f"created table {path} (id {table_id}, {counted(descriptor.buckets, 'bucket')})")
    return 0


def _list(args: argparse.Namespace) -> int:
    with open_connection(args) as conn:
        databases = [args.database] if args.database else sorted(conn.admin.list_databases())
        names = [f"{database}.{table}" for database in databases for table in sorted(conn.admin.list_tables(database))]
    if args.output == "json":
        print_json(names)
    elif names:
        print("\n".join(names))
    return 0


def _describe(args: argparse.Namespace) -> int:
    path = table_path(args)
    with open_connection(args) as conn:
        info = conn.admin.get_table_info(path)
        partitions = conn.admin.list_partition_infos(path) if info.partitioned else []
        described = info.partitioned and args.partition is None
        buckets = {} if described else conn.admin.describe_buckets(path, partition_name=args.partition)
        history = [conn.admin.get_table_schema(path, schema_id) for schema_id in range(1, info.schema_id)]
    if args.output == "json":
        versions = [{"schema_id": version.schema_id, "schema": format_schema(version.schema)} for version in history]
        print_json({**_description(info, buckets), "partitions": [p.partition_name for p in partitions], "schema_history": versions})
        return 0
    created = datetime.fromtimestamp(info.created_ms / 1000, timezone.utc).isoformat(timespec="seconds") if info.created_ms else NONE_TEXT
    print(f"table:      {info.path} (id {info.table_id})")
    print(f"buckets:    {info.buckets}")
    print(f"lake:       {'enabled' if info.lake_enabled else 'disabled'}")
    if info.bucket_keys:
        print(f"bucket key: {', '.join(info.bucket_keys)}")
    if info.partition_keys:
        print(f"partitioned by: {', '.join(info.partition_keys)} ({counted(len(partitions), 'partition')}: "
              f"{', '.join(p.partition_name + (' (lake only)' if p.lake_only else '') for p in partitions) or NONE_TEXT};"
              " --partition NAME shows one's buckets)")
    print(f"created:    {created}")
    if info.comment:
        print(f"comment:    {info.comment}")
    print(f"\nschema (id {info.schema_id}):")
    columns = [(f.name, format_type(f.type), "yes" if f.nullable else "no") for f in info.schema]
    print(_indent(render_table(("column", "type", "nullable"), columns)))
    if history:
        print("\nolder schemas (batches written under them read in the current one):")
        print(_indent("\n".join(f"{version.schema_id}: {format_schema(version.schema)}" for version in history)))
    print("\nproperties:")
    print(_indent("\n".join(f"{key} = {value}" for key, value in sorted(info.properties.items())) or "(none)"))
    print(f"\nbuckets ({NONE_TEXT}: the tier holds nothing):")
    rows = [
        (bucket, *(offset_text(value) for value in _bucket_offsets(b).values()), _servers(b.replicas), _servers(b.isr), b.leader_epoch)
        if b.leader_available
        else (bucket, f"{b.leader} (unavailable)", *["?"] * (len(_BUCKET_HEADER) - 2))
        for bucket, b in buckets.items()
    ]
    print(_indent(render_table(_BUCKET_HEADER, rows)))
    down = sorted({b.leader for b in buckets.values() if not b.leader_available})
    if down:
        lost = sum(not b.leader_available for b in buckets.values())
        print(f"\n{lost} of {len(buckets)} buckets unavailable: tablet server(s) {', '.join(map(str, down))} down or unreachable")
    for bucket, b in buckets.items():
        if b.remote_error:
            print(f"\nbucket {bucket} remote tier unusable: {b.remote_error}")
    print(f"\ntiers (each bar spans offsets 0 to the bucket's high watermark; {LEGEND}):")
    print(_indent("\n".join(line for bucket, b in buckets.items() for line in bucket_lines(bucket, b))))
    return 0


def _bucket_offsets(bucket: BucketInfo) -> dict[str, int]:
    """The leader and the offsets, in the order of the table's columns."""
    return {field.name: getattr(bucket, field.name) for field in dataclasses.fields(bucket) if field.name not in _NOT_OFFSETS}


def _servers(ids: tuple[int, ...]) -> str:
    return ",".join(map(str, ids)) or NONE_TEXT


def _description(info: TableInfo, buckets: dict[int, BucketInfo]) -> dict[str, Any]:
    """``describe --output json``: offsets of an empty tier are null."""
    return {
        "table": str(info.path),
        "table_id": info.table_id,
        "buckets": info.buckets,
        "lake_enabled": info.lake_enabled,
        "bucket_keys": list(info.bucket_keys),
        "partition_keys": list(info.partition_keys),
        "created_ms": info.created_ms or None,
        "comment": info.comment,
        "schema_id": info.schema_id,
        "schema": [{"name": f.name, "type": format_type(f.type), "nullable": f.nullable} for f in info.schema],
        "properties": dict(sorted(info.properties.items())),
        "bucket_info": [
            {
                "bucket": bucket,
                **{name: offset_or_none(value) for name, value in _bucket_offsets(b).items()},
                "leader_available": b.leader_available,
                "remote_error": b.remote_error or None,
                "replicas": list(b.replicas),
                "isr": list(b.isr),
                "leader_epoch": b.leader_epoch,
            }
            for bucket, b in buckets.items()
        ],
    }


def _alter(args: argparse.Namespace) -> int:
    path = table_path(args)
    added = parse_schema(",".join(args.add_column)) if args.add_column else pa.schema([])
    widened = parse_schema(",".join(args.widen_column)) if args.widen_column else pa.schema([])
    changes = [TableChange.add_column(f.name, f.type, args.comment) for f in added] + [
        TableChange.widen_column(f.name, f.type) for f in widened
    ]
    if not changes:
        raise InvalidAlterTableError(f"altering {path}: give --add-column NAME:TYPE or --widen-column NAME:TYPE")
    with open_connection(args) as conn:
        schema_id = conn.admin.alter_table(path, changes)
    print(f"altered table {path}: schema {schema_id}")
    return 0


def _drop(args: argparse.Namespace) -> int:
    path = table_path(args)
    with open_connection(args) as conn:
        conn.admin.drop_table(path, ignore_if_not_exists=args.if_exists)
    print(f"dropped table {path}")
    return 0


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
