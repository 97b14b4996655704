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

import grpc

from lakelog.cli.common_args import (
    add_bucket_argument,
    add_connection_arguments,
    add_table_argument,
    bootstrap_address,
    client_configuration,
    table_path,
)
from lakelog.config import Configuration
from lakelog.errors import InvalidRequestError, TableNotExistError, error_from_code
from lakelog.metadata import TablePath
from lakelog.rpc import codec
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.channel import open_channel
from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceStub, TabletServiceStub
from lakelog.rpc.status import error_from_rpc

CALL_TIMEOUT_S = 120.0


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
    conf = client_configuration(args)
    failed = False
    for bucket, summary, error in repair(bootstrap_address(args), conf, path, args.bucket, local, args.accept_truncation):
        if error:
            failed = True
            print(f"bucket {bucket}: {type(error).__name__}: {error}", file=sys.stderr)
        else:
            print(f"bucket {bucket}: {summary}")
    return 1 if failed else 0


def repair(
    bootstrap: str, conf: Configuration, path: TablePath, buckets: list[int] | None, local: bool, accept_truncation: bool
) -> list[tuple[int, str, Exception | None]]:
    """Ask each bucket's leader to repair it: ``(bucket, summary, error)`` per bucket."""
    channel = open_channel(bootstrap, conf)
    try:
        response = CoordinatorServiceStub(channel).GetMetadata(
            pb.MetadataRequest(table_path=[codec.path_to_pb(path)]), timeout=CALL_TIMEOUT_S
        )
    except grpc.RpcError as exc:
        raise error_from_rpc(exc, f"coordinator {bootstrap}") from None
    finally:
        channel.close()
    if not response.table_metadata:
        raise TableNotExistError(f"table {path} does not exist")
    info, leaders = codec.table_metadata_from_pb(response.table_metadata[0])
    nodes = {node.server_id: node for node in map(codec.node_from_pb, response.tablet_servers)}
    wanted = sorted(set(buckets)) if buckets else list(range(info.buckets))
    results: list[tuple[int, str, Exception | None]] = []
    for bucket in wanted:
        if bucket not in leaders or leaders[bucket] not in nodes:
            results.append((bucket, "", InvalidRequestError(f"{path} has no bucket {bucket} with a live leader")))
            continue
        address = nodes[leaders[bucket]].address
        request = pb.RepairLogRequest(
            table_id=info.table_id,
            bucket_id=[bucket],
            tier=pb.REPAIR_LOCAL if local else pb.REPAIR_REMOTE,
            accept_truncation=accept_truncation,
        )
        channel = open_channel(address, conf)
        try:
            answer = TabletServiceStub(channel).RepairLog(request, timeout=CALL_TIMEOUT_S).buckets[0]
        except grpc.RpcError as exc:
            results.append((bucket, "", error_from_rpc(exc, f"tablet server {address}")))
            continue
        finally:
            channel.close()
        error = error_from_code(answer.error_code, answer.error_message) if answer.error_code else None
        results.append((bucket, answer.summary, error))
    return results
