"""`lakelog offsets DB.TABLE`: per bucket, the earliest, latest or first-at-a-time offset.

Printed as ``bucket offset`` lines with no header, so shell scripts can read them with ``while read``.
"""

from __future__ import annotations

import argparse
from typing import Any

from lakelog.cli.common_args import (
    add_bucket_argument,
    add_connection_arguments,
    add_table_argument,
    open_connection,
    table_path,
    timestamp_ms,
)
from lakelog.metadata import OffsetSpec


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("offsets", help="Print each bucket's earliest, latest or by-timestamp offset.", description=__doc__.splitlines()[0])
    add_table_argument(parser)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--earliest", action="store_true", help="the first readable offset, whichever tier holds it")
    which.add_argument("--latest", action="store_true", help="the high watermark (default)")
    which.add_argument("--timestamp", type=timestamp_ms, metavar="MS", help="the first offset whose timestamp >= MS (ms or ISO 8601)")
    add_bucket_argument(parser)
    add_connection_arguments(parser)
    parser.set_defaults(handler=_run)


def offset_spec(args: argparse.Namespace) -> OffsetSpec:
    if args.earliest:
        return OffsetSpec.earliest()
    if args.timestamp is not None:
        return OffsetSpec.timestamp(args.timestamp)
    return OffsetSpec.latest()


def _run(args: argparse.Namespace) -> int:
    path = table_path(args)
    buckets = sorted(set(args.bucket)) if args.bucket else None
    with open_connection(args) as conn:
        offsets = conn.admin.list_offsets(path, buckets, offset_spec(args))
    for bucket, offset in offsets.items():
        print(f"{bucket} {offset}")
    return 0
