"""The client whose memory benchmark 8 measures, run as its own process: it scans a table from
the beginning (``iceberg-arrow`` for the lake) and prints, as JSON, what it read and its peak RSS."""

from __future__ import annotations

import argparse
import json
import sys

import pyarrow as pa

import lakelog
from lakelog.metadata import TablePath

from bench.measure import peak_rss_mb
from bench.scan import drain


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("table", help="DB.TABLE")
    parser.add_argument("records", type=int, help="records to read (0: only connect)")
    parser.add_argument("config", help="client config as JSON")
    args = parser.parse_args()
    database, name = args.table.split(".")
    with lakelog.connect(args.bootstrap, json.loads(args.config)) as conn:
        table = conn.get_table(TablePath(database, name))
        read = drain(table, args.records) if args.records else 0
    peaks = {"rss_peak_mb": peak_rss_mb(), "arrow_pool_peak_mb": pa.default_memory_pool().max_memory() / 1e6}
    json.dump({"records": read, **peaks}, sys.stdout)


if __name__ == "__main__":
    main()
