"""`lakelog group list|describe|offsets|reset`: consumer groups, their members, commits and lag.

``describe`` shows each member (id, epoch, client, buckets) and per bucket its reader, committed
offset, high watermark and lag. ``reset`` sets a group's committed offsets of a table to the
earliest, the latest or the first offset at a timestamp (lake included); the coordinator refuses it
while the group has members.
"""

from __future__ import annotations

import argparse
from typing import Any

from lakelog.cli.common_args import add_connection_arguments, add_table_argument, open_connection, table_path, timestamp_ms
from lakelog.cli.offsets_command import offset_spec
from lakelog.cli.output_format import add_output_argument, print_json
from lakelog.cli.text_table import render_table
from lakelog.consumer_groups import GroupBucket


def register(subparsers: Any) -> None:
    group = subparsers.add_parser("group", help="List, describe and reset consumer groups.", description=__doc__.splitlines()[0])
    commands = group.add_subparsers(dest="group_command", required=True, metavar="ACTION")

    listing = commands.add_parser("list", help="Every group with members or commits: members and lag.")
    listing.set_defaults(handler=_list)

    describe = commands.add_parser("describe", help="A group's members and, per bucket, reader, committed offset and lag.")
    describe.add_argument("name", help="the group")
    describe.set_defaults(handler=_describe)

    offsets = commands.add_parser("offsets", help="A group's committed offsets of a table.")
    offsets.add_argument("name", help="the group")
    add_table_argument(offsets)
    offsets.set_defaults(handler=_offsets)

    reset = commands.add_parser("reset", help="Set a group's committed offsets of a table (only while it has no member).")
    reset.add_argument("name", help="the group")
    add_table_argument(reset)
    which = reset.add_mutually_exclusive_group(required=True)
    which.add_argument("--earliest", action="store_true", help="the first readable offset, whichever tier holds it")
    which.add_argument("--latest", action="store_true", help="the high watermark: only records appended from now on")
    which.add_argument("--timestamp", type=timestamp_ms, metavar="MS", help="the first offset whose timestamp >= MS (ms or ISO 8601)")
    reset.set_defaults(handler=_reset)

    for parser in (listing, describe, offsets, reset):
        add_output_argument(parser)
        add_connection_arguments(parser)


def _key(bucket: GroupBucket) -> str:
    return f"{bucket.partition_id}/{bucket.bucket}" if bucket.partition_id else str(bucket.bucket)


def _shown(value: int | None) -> Any:
    return "-" if value is None else value


def _list(args: argparse.Namespace) -> int:
    with open_connection(args) as conn:
        groups = conn.admin.list_groups()
    if args.output == "json":
        print_json([{"group": g.group_id, "members": g.members, "lag": g.lag} for g in groups])
    else:
        print(render_table(("group", "members", "lag"), [(g.group_id, g.members, g.lag) for g in groups]))
    return 0


def _describe(args: argparse.Namespace) -> int:
    with open_connection(args) as conn:
        described = conn.admin.describe_group(args.name)
    if args.output == "json":
        print_json(
            {
                "group": described.group_id,
                "epoch": described.group_epoch,
                "lag": described.lag,
                "members": [
                    {"member_id": m.member_id, "epoch": m.member_epoch, "client": m.client_id, "table": str(m.table), "buckets": [_key(b) for b in m.buckets]}
                    for m in described.members
                ],
                "buckets": [
                    {
                        "table": str(s.table),
                        "bucket": _key(s.bucket),
                        "member_id": s.member_id,
                        "committed": s.committed,
                        "high_watermark": s.high_watermark,
                        "lag": s.lag,
                    }
                    for s in described.buckets
                ],
            }
        )
        return 0
    print(f"group {described.group_id}: {len(described.members)} member(s), epoch {described.group_epoch}, lag {described.lag}")
    members = [(m.member_id, m.member_epoch, m.client_id, str(m.table), " ".join(_key(b) for b in m.buckets) or "-") for m in described.members]
    print(render_table(("member", "epoch", "client", "table", "buckets"), members))
    rows = [
        (str(s.table), _key(s.bucket), s.member_id or "-", _shown(s.committed), _shown(s.high_watermark), _shown(s.lag)) for s in described.buckets
    ]
    print(render_table(("table", "bucket", "member", "committed", "high watermark", "lag"), rows))
    return 0


def _offsets(args: argparse.Namespace) -> int:
    with open_connection(args) as conn:
        offsets = conn.admin.list_group_offsets(args.name, table_path(args))
    _print_offsets(args, offsets, "committed offset")
    return 0


def _reset(args: argparse.Namespace) -> int:
    spec, label = offset_spec(args)
    with open_connection(args) as conn:
        offsets = conn.admin.reset_group_offsets(args.name, table_path(args), spec=spec)
    _print_offsets(args, offsets, f"committed offset ({label})")
    return 0


def _print_offsets(args: argparse.Namespace, offsets: dict[Any, int], label: str) -> None:
    rows = [("/".join(map(str, key)) if isinstance(key, tuple) else str(key), offset) for key, offset in offsets.items()]
    if args.output == "json":
        print_json([{"bucket": bucket, "offset": offset} for bucket, offset in rows])
    else:
        print(render_table(("bucket", label), rows))
