"""`lakelog scan DB.TABLE`: print a table's records, from any tier, as a text table, JSON lines, CSV,
Parquet or an Arrow IPC stream.

Without ``--follow`` a scan is a snapshot: it reads each bucket up to the high watermark the servers
reported when it started, so it ends even while producers keep writing. Every poll is printed as it
arrives; nothing accumulates (but a Parquet row group), so a scan of any size runs in bounded memory.
When stdout is a file or a pipe, progress toward that snapshot goes to stderr (a bar on a terminal,
plain lines otherwise, :mod:`lakelog.progress`); on a terminal the records themselves show it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.cli.common_args import (
    add_bucket_argument,
    add_partition_argument,
    add_connection_arguments,
    add_table_argument,
    open_connection,
    table_path,
    timestamp_ms,
)
from lakelog.progress import Progress
from lakelog.cli.record_writers import BINARY_FORMATS, OUTPUT_FORMATS, RecordWriter, open_writer, plain_value
from lakelog.cli.text_table import TextTable
from lakelog.client.scanner.log_scanner import LogScanner
from lakelog.client.table import Table
from lakelog.record.meta_columns import BUCKET_COLUMN, META_COLUMNS, META_FIELDS, OFFSET_COLUMN
from lakelog.errors import InvalidPartitionError, InvalidRequestError
from lakelog.metadata import OffsetSpec

CHUNK_ROWS = 4096  # rows converted and written at a time: bounds the Python objects alive at once


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("scan", help="Print a table's records.", description=__doc__.splitlines()[0])
    add_table_argument(parser)
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at each bucket's earliest offset (default)")
    start.add_argument("--offset", type=int, metavar="N", help="start every chosen bucket at offset N")
    start.add_argument("--timestamp", type=timestamp_ms, metavar="MS", help="start at the first record with timestamp >= MS (ms or ISO 8601)")
    add_bucket_argument(parser)
    add_partition_argument(parser)
    parser.add_argument("--columns", metavar="A,B", help="only these columns, in this order")
    parser.add_argument("--max-records", type=int, metavar="N", help="stop after N records")
    parser.add_argument(
        "--output", choices=("table", *OUTPUT_FORMATS), default="table",
        help="text table (default), one JSON object per line, CSV, Parquet or an Arrow IPC stream",
    )
    parser.add_argument("--follow", action="store_true", help="keep waiting for new records (Ctrl-C stops)")
    parser.add_argument("--timeout-ms", type=int, default=1000, metavar="MS", help="how long one poll waits for records")
    add_connection_arguments(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    path = table_path(args)
    if args.max_records is not None and args.max_records < 0:
        raise InvalidRequestError(f"--max-records must be >= 0, got {args.max_records}")
    try:
        with open_connection(args) as conn:
            table = conn.get_table(path)
            if table.info.partitioned or args.partition is not None:
                table = table.partition(_partition_name(table, args.partition))
            scan = table.new_scan()
            if args.columns:
                scan = scan.project([name.strip() for name in args.columns.split(",") if name.strip()])
            buckets = sorted(set(args.bucket)) if args.bucket else list(range(table.info.buckets))
            with scan.create_log_scanner() as scanner:
                stop = None if args.follow else conn.admin.list_offsets(path, buckets, OffsetSpec.latest(), table.info.partition_name or None)
                _subscribe(scanner, args, buckets)
                names = [*META_COLUMNS, *scanner.schema.names]
                output = _output(args.output, scanner, names)
                with Progress(f"lakelog scan {path}", _total(scanner, stop, args.max_records), enabled=not sys.stdout.isatty()) as progress:
                    _stream(scanner, stop, args.max_records, args.timeout_ms, names, output, progress)
    except BrokenPipeError:
        # `lakelog scan ... | head`: the reader left, which is not an error; keep Python quiet at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _partition_name(table: Table, name: str | None) -> str:
    if name is None:
        raise InvalidPartitionError(f"{table.path} is partitioned: give --partition NAME (`lakelog partition list {table.path}` names them)")
    return name


def _output(fmt: str, scanner: LogScanner, names: list[str]) -> RecordWriter:
    """Where polls go: the text table, or a file format written to stdout's bytes."""
    if fmt == "table":
        return TableOutput(names)
    if fmt in BINARY_FORMATS and sys.stdout.isatty():
        raise InvalidRequestError(f"--output {fmt} is binary; redirect it to a file or a pipe, not the terminal")
    sys.stdout.flush()
    return open_writer(fmt, sys.stdout.buffer, pa.schema([*META_FIELDS, *scanner.schema]))


def _subscribe(scanner: LogScanner, args: argparse.Namespace, buckets: list[int]) -> None:
    if args.offset is not None:
        for bucket in buckets:
            scanner.subscribe(bucket, args.offset)
    elif args.timestamp is not None:
        scanner.subscribe_from_timestamp(args.timestamp, buckets)
    else:
        scanner.subscribe_from_beginning(buckets)


def _total(scanner: LogScanner, stop: dict[int, int] | None, max_records: int | None) -> int | None:
    """Records the scan will print: from each bucket's start to its stop offset (unknown with --follow)."""
    if stop is None:
        return max_records
    positions = scanner.positions()
    total = sum(max(end - positions.get(bucket, end), 0) for bucket, end in stop.items())
    return total if max_records is None else min(total, max_records)


def _stream(
    scanner: LogScanner,
    stop: dict[int, int] | None,
    max_records: int | None,
    timeout_ms: int,
    names: list[str],
    output: RecordWriter,
    progress: Progress,
) -> None:
    """Poll and print until every bucket reached ``stop`` (never, with ``None``) or ``max_records``."""
    remaining = max_records
    pending = dict(stop) if stop is not None else None
    while remaining != 0:
        if pending is not None:
            _drop_finished(scanner, pending)
            if not pending:
                break
        table = scanner.poll_arrow(timeout_ms)
        if stop is not None:
            table = _before(table, stop)
        if remaining is not None:
            table = table.slice(0, remaining)
            remaining -= table.num_rows
        for chunk in table.select(names).to_batches(max_chunksize=CHUNK_ROWS):
            output.write(chunk)
        output.flush()
        progress.advance(table.num_rows)
    output.finish()


def _before(table: pa.Table, stop: dict[int, int]) -> pa.Table:
    """Only records below each bucket's stop offset: later ones were written after the scan started."""
    if not table.num_rows:
        return table
    ends = pa.array([stop.get(bucket, 0) for bucket in range(max(stop) + 1)], pa.int64())
    return table.filter(pc.less(table[OFFSET_COLUMN], pc.take(ends, table[BUCKET_COLUMN])))


def _drop_finished(scanner: LogScanner, pending: dict[int, int]) -> None:
    positions = scanner.positions()
    for bucket, end in list(pending.items()):
        if positions.get(bucket, end) >= end:
            del pending[bucket]
            scanner.unsubscribe(bucket)


class TableOutput:
    def __init__(self, names: Sequence[str]) -> None:
        self._names = list(names)
        self._table = TextTable(self._names)
        self._printed = False

    def write(self, batch: pa.RecordBatch) -> None:
        columns = [_python_values(batch.column(name), _cell) for name in self._names]
        sys.stdout.write("\n".join(self._table.render(list(zip(*columns)))) + "\n")
        self._printed = True

    def flush(self) -> None:
        sys.stdout.flush()

    def finish(self) -> None:
        if not self._printed:  # an empty scan still shows which columns it would have printed
            sys.stdout.write("\n".join(self._table.render([])) + "\n")


def _python_values(array: pa.Array, convert: Callable[[Any], Any]) -> list[Any]:
    """A column as Python values, converted only where its type has no plain JSON form (fast path)."""
    values = array.to_pylist()
    if pa.types.is_integer(array.type) or pa.types.is_floating(array.type) or pa.types.is_string(array.type):
        return values
    return [convert(value) for value in values]


def _cell(value: Any) -> Any:
    """JSON spellings in the text table too (true, not True), so both outputs read the same."""
    converted = plain_value(value)
    return json.dumps(converted) if isinstance(converted, (dict, list, bool)) else converted
