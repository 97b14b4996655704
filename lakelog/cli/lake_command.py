"""`lakelog lake compact|expire`: maintenance of a lake-enabled table's Iceberg table.

``compact`` bin-packs the table's small data files into files of
``table.datalake.target-file-size`` in Spark tasks, committed as one snapshot that holds the same
records, offsets and lake ranges. ``expire`` removes snapshots older than
``table.datalake.snapshot-retention`` that no reader, consistent cut or the coordinator still needs,
and the files only they referenced. Both may run while ``lakelog tier`` runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from lakelog.cli.common_args import add_connection_arguments, bootstrap_address, client_configuration
from lakelog.cli.output_format import add_output_argument, print_json
from lakelog.human_size import human_size
from lakelog.logging_config import configure_logging
from lakelog.metadata import TablePath


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("lake", help="Lake table maintenance: compact small files, expire old snapshots.", description=__doc__.splitlines()[0])
    actions = parser.add_subparsers(dest="lake_action", required=True, metavar="ACTION")
    compact = actions.add_parser("compact", help="Bin-pack a lake table's small files (PySpark tasks).")
    compact.add_argument(
        "--spark-master", metavar="URL",
        help="local[*], spark://HOST:PORT or sc://HOST:PORT; default: lake.spark.master (the job's, else the coordinator's), else local[*]",
    )
    expire = actions.add_parser("expire", help="Expire old lake snapshots and delete the files only they referenced.")
    for action in (compact, expire):
        action.add_argument("--table", required=True, metavar="DB.TABLE", help="the lake-enabled table")
        add_output_argument(action)
        add_connection_arguments(action)
    compact.set_defaults(handler=run_compact)
    expire.set_defaults(handler=run_expire)


def run_compact(args: argparse.Namespace) -> int:
    from lakelog.tiering.lake_maintenance import LakeMaintenance  # PySpark and PyIceberg only here

    configure_logging()
    config = client_configuration(args)
    with LakeMaintenance(bootstrap_address(args), config.items(), args.spark_master, spark_log_level=args.log_level or "ERROR") as maintenance:
        report = maintenance.compactor().compact(TablePath.parse(args.table))
    if args.output == "json":
        print_json({
            "table": str(report.path), "snapshot_id": report.snapshot_id, "files_replaced": report.files_replaced,
            "files_written": report.files_written, "records": report.records, "bytes_written": report.bytes_written,
            "seconds": round(report.seconds, 3),
        })
        return 0
    if report.snapshot_id is None:
        print(f"{report.path}: nothing to compact")
    else:
        rate = report.records / report.seconds if report.seconds > 0 else 0.0
        print(
            f"{report.path}: {report.files_replaced} files -> {report.files_written}, {report.records:,} records"
            f" ({human_size(report.bytes_written)}) in {report.seconds:.1f} s ({rate:,.0f} records/s), snapshot {report.snapshot_id}"
        )
    return 0


def run_expire(args: argparse.Namespace) -> int:
    from lakelog.tiering.lake_maintenance import LakeMaintenance  # PyIceberg only here

    configure_logging()
    config = client_configuration(args)
    with LakeMaintenance(bootstrap_address(args), config.items()) as maintenance:
        report = maintenance.expiry().expire(TablePath.parse(args.table))
    if args.output == "json":
        print_json({
            "table": str(report.path), "snapshots_expired": report.snapshots_expired, "snapshots_kept": report.snapshots_kept,
            "files_deleted": report.files_deleted, "orphans_deleted": report.orphans_deleted,
        })
        return 0
    print(
        f"{report.path}: expired {report.snapshots_expired} snapshot(s), kept {report.snapshots_kept};"
        f" deleted {report.files_deleted} file(s) only they referenced and {report.orphans_deleted} orphan data file(s)"
    )
    return 0
