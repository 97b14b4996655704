"""`lakelog tier`: run the PySpark job that tiers lake-enabled tables into their Iceberg tables.

``lakelog tier status`` prints instead, per table a tiering job reported, how fresh its lake is.

The same arguments work for ``python -m lakelog.tiering`` and for ``spark-submit`` of
``tiering/__main__.py`` (in a checkout; ``lakelog/tiering/__main__.py`` of an installed package). Lake catalog properties come from the coordinator (secrets left
out); add the job's own with ``--set datalake.iceberg.KEY=VALUE`` or the usual AWS variables.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterator

from lakelog.cli.common_args import add_connection_arguments, bootstrap_address, client_configuration, open_connection
from lakelog.cli.output_format import NONE_TEXT, add_output_argument, offset_or_none, print_json
from lakelog.cli.text_table import render_table
from lakelog.config import parse_duration_ms
from lakelog.logging_config import configure_logging
from lakelog.metadata import TablePath

if TYPE_CHECKING:
    from lakelog.tiering.tiering_job import TieringJob


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "tier", help="Run the PySpark tiering job (lake-enabled tables -> Iceberg).", description=__doc__.splitlines()[0]
    )
    add_arguments(parser)
    parser.set_defaults(handler=run)


def _duration(text: str) -> int:
    try:
        return parse_duration_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action", nargs="?", choices=["run", "status"], default="run", help="run the job (default) or print the tiering status"
    )
    parser.add_argument(
        "--table", action="append", default=[], metavar="DB.TABLE",
        help="tier only this table (repeatable; default: every lake-enabled table)",
    )
    parser.add_argument("--once", action="store_true", help="run one round and exit")
    parser.add_argument("--interval", type=_duration, default=10_000, metavar="DURATION", help="time between rounds (default 10s)")
    parser.add_argument(
        "--spark-master",
        metavar="URL",
        help="local[*], spark://HOST:PORT or sc://HOST:PORT (Spark Connect); default: lake.spark.master (the job's, else the"
        " coordinator's), else local[*]; under spark-submit, its master",
    )
    parser.add_argument(
        "--metrics-port", type=int, metavar="N",
        help="serve Prometheus metrics on this port (0 picks a free one; default: metrics.port, -1 = off)",
    )
    parser.add_argument("--max-records-per-round", type=_positive, metavar="N", help="records a round tiers per table at most, shared fairly by the buckets")
    add_output_argument(parser)
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if args.action == "status":
        return _print_status(args)
    from lakelog.tiering.tiering_job import TieringJob, TieringOptions  # PySpark and PyIceberg only here

    configure_logging()
    config = client_configuration(args)
    options = TieringOptions(
        bootstrap=bootstrap_address(args),
        tables=tuple(TablePath.parse(text) for text in args.table),
        interval_ms=args.interval,
        max_records_per_round=args.max_records_per_round,
        spark_master=args.spark_master,
        spark_log_level=args.log_level or "ERROR",
        client_config=config.items(),
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    port = args.metrics_port if args.metrics_port is not None else config.get("metrics.port")
    with TieringJob(options) as job, _metrics_endpoint(job, config.get("metrics.host"), port):
        job.run(once=args.once, stop=stop)
    return 0


@contextmanager
def _metrics_endpoint(job: "TieringJob", host: str, port: int) -> Iterator[None]:
    """The job's metrics on ``host:port`` while it runs (nothing when ``port`` is -1)."""
    if port < 0:
        yield
        return
    from lakelog.metrics_endpoint import MetricsEndpoint  # prometheus_client: the [server] extra

    endpoint = MetricsEndpoint(job.metrics.registry, host, port)
    print(f"lakelog tier: metrics at {endpoint.url}", file=sys.stderr, flush=True)
    try:
        yield
    finally:
        endpoint.close()


def _print_status(args: argparse.Namespace) -> int:
    with open_connection(args) as conn:
        status = conn.admin.get_tiering_status()
    if args.output == "json":
        print_json([
            {"table": str(s.path), "job": s.job_id, "last_barrier_ms": offset_or_none(s.last_barrier),
             "lake_max_timestamp_ms": offset_or_none(s.lake_max_timestamp), "lag_ms": offset_or_none(s.lag_ms),
             "offsets_behind": s.offsets_behind}
            for s in status.values()
        ])
        return 0
    if not status:
        print("no tiering job has reported yet (`lakelog tier` runs one)")
        return 0
    rows = [
        [str(s.path), s.job_id, _time_text(s.last_barrier), _time_text(s.lake_max_timestamp), _lag_text(s.lag_ms), s.offsets_behind]
        for s in status.values()
    ]
    print(render_table(["table", "job", "last barrier", "lake holds records up to", "lake lag", "offsets behind"], rows))
    return 0


def _time_text(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds") if ms >= 0 else NONE_TEXT


def _lag_text(ms: int) -> str:
    return f"{ms / 1000:,.1f} s" if ms >= 0 else NONE_TEXT
