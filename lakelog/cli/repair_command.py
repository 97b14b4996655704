"""`lakelog repair remote|local DB.TABLE`: an operator's explicit repair of buckets the server
refuses to guess about.

``remote`` rebuilds a bucket's remote manifest from its segment files and their indexes, after it
went missing or was damaged (until then the server neither reads nor deletes that remote range).
``local`` lifts the fence of a bucket whose local log came back shorter than what it had
acknowledged; it needs ``--accept-truncation``, the operator's word that those records are gone.
Each bucket is repaired by the tablet server leading it; one line per bucket says what was done.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lakelog.cli.common_args import add_bucket_argument, add_connection_arguments, add_table_argument, open_connection, table_path
from lakelog.errors import InvalidRequestError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("repair", help="Repair a bucket's remote manifest or accept a truncated local log.", description=__doc__.splitlines()[0])
    tiers = parser.add_subparsers(dest="tier", required=True, metavar="TIER")
    remote = tiers.add_parser("remote", help="Rebuild the remote manifests of a table's buckets from their segment files.")
    local = tiers.add_parser("local", help="Accept that a bucket's local log lost acknowledged records, and let it take writes again.")
    local.add_argument("--accept-truncation", action="store_true", default=False, help="required: the records past the recovered end are gone")
    for tier in (remote, local):
        add_table_argument(tier)
        add_bucket_argument(tier)
        add_connection_arguments(tier)
        tier.set_defaults(handler=_run, accept_truncation=False)


def _run(args: argparse.Namespace) -> int:
    path = table_path(args)
    local = args.tier == "local"
    if local and (not args.bucket or not args.accept_truncation):
        raise InvalidRequestError("`lakelog repair local` needs --bucket N and --accept-truncation (the records lost stay lost)")
    failed = False
    with open_connection(args) as conn:
        buckets = sorted(set(args.bucket)) if args.bucket else None
        for repair in conn.admin.repair_buckets(path, buckets, local, args.accept_truncation):
            if repair.error:
                failed = True
                print(f"bucket {repair.bucket}: {type(repair.error).__name__}: {repair.error}", file=sys.stderr)
            else:
                print(f"bucket {repair.bucket}: {repair.summary}")
    return 1 if failed else 0
