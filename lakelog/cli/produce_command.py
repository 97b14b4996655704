"""`lakelog produce DB.TABLE --file PATH|-`: append a CSV, JSON lines or Parquet file to a table.

The file streams through in bounded Arrow batches (see :mod:`lakelog.cli.record_files`), so its size
is not limited by memory. Progress goes to stderr (:mod:`lakelog.progress`: a bar with the total
and time left on a terminal, plain lines elsewhere); the result line goes to stdout. The total is
exact for Parquet and counted from the file's lines for plain CSV and JSON lines (unknown for stdin
and compressed files).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from lakelog.cli.common_args import add_connection_arguments, add_table_argument, open_connection, table_path
from lakelog.progress import Progress, counted
from lakelog.cli.record_files import FORMATS, STDIN, infer_format, read_batches
from lakelog.client.writer import AppendWriter


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("produce", help="Append a CSV, JSON lines or Parquet file to a table.", description=__doc__.splitlines()[0])
    add_table_argument(parser)
    parser.add_argument("--file", required=True, metavar="PATH|-", help="file to read; - reads stdin (csv or jsonl)")
    parser.add_argument("--format", choices=FORMATS, help="file format (default: from the extension; .gz etc. are decompressed)")
    parser.add_argument("--batch-rows", type=int, default=50_000, metavar="N", help="rows per batch for JSON lines and Parquet")
    parser.add_argument("--delimiter", default=",", metavar="CHAR", help="CSV field delimiter (default ',', '\\t' for .tsv)")
    add_connection_arguments(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    path = table_path(args)
    fmt = args.format or infer_format(args.file)
    with open_connection(args) as conn:
        table = conn.get_table(path)
        batches = read_batches(args.file, fmt, table.schema, max(args.batch_rows, 1), args.delimiter)
        writer = table.new_append().create_writer()
        with Progress(f"lakelog produce {path}", _record_total(args.file, fmt)) as progress:
            try:
                for batch in batches:
                    writer.append_arrow(batch)
                    progress.advance(batch.num_rows)
                writer.close()
            except BaseException:
                _close_after_failure(writer, progress, str(path))
                raise
    print(f"produced {counted(progress.count, 'record')} to {path}", flush=True)
    return 0


def _record_total(file: str, fmt: str) -> int | None:
    """How many records the file holds, when that is cheap to know: a Parquet footer, or the lines of
    a plain CSV (less its header) or JSON lines file, read at disk speed (and left in the page cache
    for the real read). None for stdin and compressed files."""
    if file == STDIN or not os.path.isfile(file):
        return None
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            return pq.ParquetFile(file).metadata.num_rows
        except (OSError, ValueError):
            return None  # read_batches reports what is wrong with it
    with open(file, "rb") as stream:
        head = stream.read(4)
        if head[:2] == b"\x1f\x8b" or head in (b"\x28\xb5\x2f\xfd", b"\x04\x22\x4d\x18") or head[:3] == b"BZh":
            return None  # gzip, zstd, lz4, bzip2: the lines are not countable without decompressing
        stream.seek(0)
        lines, last = 0, b"\n"
        for block in iter(lambda: stream.read(1 << 24), b""):
            lines += block.count(b"\n")
            last = block[-1:]
    lines += last != b"\n"  # a last line without a newline
    return max(lines - (fmt == "csv"), 0)


def _close_after_failure(writer: AppendWriter, progress: Progress, label: str) -> None:
    """Send what was read before the failure, and say so: the user must know the table changed."""
    try:
        writer.close()
        progress.close(summary=False)
        print(f"lakelog produce: {counted(progress.count, 'record')} were produced to {label} before the failure", file=sys.stderr)
    except Exception as exc:  # the original failure is the one to report; this one is context
        print(f"lakelog produce: closing the writer also failed: {exc}", file=sys.stderr)
