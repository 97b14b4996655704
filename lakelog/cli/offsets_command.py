"""`lakelog offsets DB.TABLE`: per bucket, the earliest, latest or first-at-a-time offset.

Printed as a labelled table; ``--output json`` gives scripts ``[{"bucket": 0, "offset": 3}, ...]``.
"""

from __future__ import annotations

import argparse
from typing import Any

from lakelog.cli.common_args import (
    add_bucket_argument,
    add_partition_argument,
    add_connection_arguments,
    add_table_argument,
    open_connection,
    table_path,
    timestamp_ms,
)
from lakelog.cli.output_format import add_output_argument, print_json
from lakelog.cli.text_table import render_table
from lakelog.metadata import OffsetSpec


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("offsets", help="Print each bucket's earliest, latest or by-timestamp offset.", description=__doc__.splitlines()[0])
    add_table_argument(parser)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--earliest", action="store_true", help="the first readable offset, whichever tier holds it")
    which.add_argument("--latest", action="store_true", help="the high watermark (default)")
    which.add_argument("--timestamp", type=timestamp_ms, metavar="MS", help="the first offset whose timestamp >= MS (ms or ISO 8601)")
    add_bucket_argument(parser)
    add_partition_argument(parser)
    add_output_argument(parser)
    add_connection_arguments(parser)
    parser.set_defaults(handler=_run)


def offset_spec(args: argparse.Namespace) -> tuple[OffsetSpec, str]:
    """The spec the flags ask for, and the label of its column."""
    if args.earliest:
        return OffsetSpec.earliest(), "earliest offset"
    if args.timestamp is not None:
        return OffsetSpec.timestamp(args.timestamp), f"first offset at or after {args.timestamp} ms"
    return OffsetSpec.latest(), "latest offset"


def _run(args: argparse.Namespace) -> int:
    path = table_path(args)
    buckets = sorted(set(args.bucket)) if args.bucket else None
    spec, label = offset_spec(args)
    with open_connection(args) as conn:
        offsets = conn.admin.list_offsets(path, buckets, spec, partition_name=args.partition)
    if args.output == "json":
        print_json([{"bucket": bucket, "offset": offset} for bucket, offset in offsets.items()])
    else:
        print(render_table(("bucket", label), list(offsets.items())))
    return 0
