"""`lakelog spark-connect`: run a Spark Connect server from the installed pyspark, in the foreground.

A coordinator started with ``lake.spark.master=sc://HOST:PORT`` hands that address to clients and
the tiering job, which then run their Spark work here without a JVM of their own.
"""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

from lakelog.config import key_value_pairs
from lakelog.spark_runtime.connect_server import DEFAULT_MASTER, DEFAULT_PORT, SparkConnectServer


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("spark-connect", help="Run a Spark Connect server for clients and the tiering job.", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1; 0.0.0.0 for every interface)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument("--master", default=DEFAULT_MASTER, help=f"where its Spark work runs: {DEFAULT_MASTER} (default) or a cluster URL (spark://HOST:PORT)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable), e.g. spark.driver.memory=4g")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    server = SparkConnectServer(args.host, args.port, args.master, key_value_pairs(args.conf, "--conf"))
    # From a thread: stop() waits for the JVM, which the main thread is already waiting for.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: threading.Thread(target=server.stop, name="shutdown").start())
    server.start()
    print(f"lakelog spark-connect ready on {server.address} (master {args.master})", flush=True)
    server.wait()
    return 0
