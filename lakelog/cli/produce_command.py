"""`lakelog produce DB.TABLE --file PATH|-`: append a CSV, JSON lines or Parquet file to a table.

The file streams through in bounded Arrow batches (see :mod:`lakelog.cli.record_files`), so its size
is not limited by memory. Progress goes to stderr as plain lines (no carriage-return tricks, so a
log file or CI output reads the same as a terminal); the result line goes to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from lakelog.cli.common_args import add_connection_arguments, add_table_argument, open_connection, table_path
from lakelog.cli.output_format import counted
from lakelog.cli.record_files import FORMATS, infer_format, read_batches
from lakelog.client.writer import AppendWriter

PROGRESS_INTERVAL_S = 1.0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("produce", help="Append a CSV, JSON lines or Parquet file to a table.", description=__doc__.splitlines()[0])
    add_table_argument(parser)
    parser.add_argument("--file", required=True, metavar="PATH|-", help="file to read; - reads stdin (csv or jsonl)")
    parser.add_argument("--format", choices=FORMATS, help="file format (default: from the extension; .gz etc. are decompressed)")
    parser.add_argument("--batch-rows", type=int, default=50_000, metavar="N", help="rows per batch for JSON lines and Parquet")
    parser.add_argument("--delimiter", default=",", metavar="CHAR", help="CSV field delimiter (default ',', '\\t' for .tsv)")
    add_connection_arguments(parser)
    parser.set_defaults(handler=_run)


class Progress:
    """Counts records and prints a line at most every ``interval_s`` seconds."""

    def __init__(self, label: str, stream: TextIO, interval_s: float = PROGRESS_INTERVAL_S) -> None:
        self.label = label
        self.count = 0
        self._stream = stream
        self._interval_s = interval_s
        self._started = self._last = time.monotonic()

    def add(self, records: int) -> None:
        self.count += records
        now = time.monotonic()
        if now - self._last >= self._interval_s:
            self._last = now
            rate = self.count / max(now - self._started, 1e-9)
            print(f"lakelog produce: {counted(self.count, 'record')} to {self.label} ({rate:,.0f} records/s)", file=self._stream, flush=True)


def _run(args: argparse.Namespace) -> int:
    path = table_path(args)
    fmt = args.format or infer_format(args.file)
    with open_connection(args) as conn:
        table = conn.get_table(path)
        batches = read_batches(args.file, fmt, table.schema, max(args.batch_rows, 1), args.delimiter)
        progress = Progress(str(path), sys.stderr)
        writer = table.new_append().create_writer()
        try:
            for batch in batches:
                writer.append_arrow(batch)
                progress.add(batch.num_rows)
            writer.close()
        except BaseException:
            _close_after_failure(writer, progress)
            raise
    print(f"produced {counted(progress.count, 'record')} to {path}", flush=True)
    return 0


def _close_after_failure(writer: AppendWriter, progress: Progress) -> None:
    """Send what was read before the failure, and say so: the user must know the table changed."""
    try:
        writer.close()
        print(f"lakelog produce: {counted(progress.count, 'record')} were produced to {progress.label} before the failure", file=sys.stderr)
    except Exception as exc:  # the original failure is the one to report; this one is context
        print(f"lakelog produce: closing the writer also failed: {exc}", file=sys.stderr)
