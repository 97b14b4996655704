"""CSV, JSON lines and Parquet files read as a stream of Arrow batches of one table's schema.

``lakelog produce`` must handle files larger than memory, so every reader yields bounded batches
(CSV blocks, Parquet row batches, JSON lines in chunks) and converts them to the table's schema as
it goes. Columns named ``__bucket``, ``__offset`` and ``__timestamp`` are dropped, so the output of
``lakelog scan --output jsonl`` can be produced again into another table. Binary values in JSON are
base64, the form ``scan`` prints them in.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import sys
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import IO, Any, Callable, Iterator

import orjson
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from lakelog.cli import csv_errors
from lakelog.client.arrow_input import arrow_table
from lakelog.errors import InvalidRequestError, SchemaMismatchError
from lakelog.record.meta_columns import META_COLUMNS

STDIN = "-"
FORMATS = ("csv", "jsonl", "parquet")
_EXTENSIONS = {".csv": "csv", ".tsv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet"}
_COMPRESSIONS = (".gz", ".bz2", ".zst", ".lz4")
CSV_BLOCK_BYTES = 4 << 20


def infer_format(file: str) -> str:
    """The format a file name implies (``data.csv.gz`` is CSV); stdin has no name, so it must be told."""
    if file == STDIN:
        raise InvalidRequestError("reading stdin (--file -) needs --format csv or --format jsonl")
    suffixes = [s.lower() for s in Path(file).suffixes]
    if suffixes and suffixes[-1] in _COMPRESSIONS:
        suffixes.pop()
    fmt = _EXTENSIONS.get(suffixes[-1]) if suffixes else None
    if fmt is None:
        raise InvalidRequestError(f"cannot tell the format of {file!r} from its extension; pass --format {'|'.join(FORMATS)}")
    return fmt


def read_batches(file: str, fmt: str, schema: pa.Schema, batch_rows: int, delimiter: str = ",") -> Iterator[pa.RecordBatch]:
    """Batches of ``schema`` from ``file`` (``-`` for stdin); read errors become lakelog errors."""
    if fmt == "parquet" and file == STDIN:
        raise InvalidRequestError("Parquet cannot be read from stdin (its footer needs a seekable file); pass a path")
    readers: dict[str, Callable[[], Iterator[pa.RecordBatch]]] = {
        "csv": lambda: _csv(file, schema, delimiter),
        "jsonl": lambda: _jsonl(file, schema, batch_rows),
        "parquet": lambda: _parquet(file, schema, batch_rows),
    }
    label = "stdin" if file == STDIN else file
    try:
        for batch in readers[fmt]():
            yield from arrow_table(batch, schema, label).to_batches()
    except FileNotFoundError:
        raise InvalidRequestError(f"no such file: {file}") from None
    except (OSError, pa.ArrowException) as exc:
        raise SchemaMismatchError(f"cannot read {label} as {fmt}: {exc}") from None


# CSV and Parquet: Arrow's own streaming readers


def _csv(file: str, schema: pa.Schema, delimiter: str) -> Iterator[pa.RecordBatch]:
    path = None if file == STDIN else file
    delimiter = "\t" if file.lower().endswith(".tsv") else delimiter
    header = None
    try:
        reader = pa_csv.open_csv(
            path or sys.stdin.buffer,
            read_options=pa_csv.ReadOptions(block_size=CSV_BLOCK_BYTES),
            parse_options=pa_csv.ParseOptions(delimiter=delimiter),
            # As in PostgreSQL's CSV COPY: an empty field is null, a quoted "" is an empty string.
            convert_options=pa_csv.ConvertOptions(
                column_types={field.name: _csv_type(field.type) for field in schema},
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )
        header = reader.schema.names
        csv_errors.check_header(header, schema.names, META_COLUMNS, path or "stdin", delimiter)
        yield from reader
    except pa.ArrowInvalid as exc:
        raise csv_errors.explain(exc, path or "stdin", path, header, delimiter) from None


def _csv_type(data_type: pa.DataType) -> pa.DataType:
    """Timestamps parse at ns and are cast down (exactly) later: Arrow's CSV parser refuses more
    fractional digits than the unit has, so ``...:01.001000`` (what ``scan`` prints) would fail at ms."""
    if pa.types.is_timestamp(data_type):
        return pa.timestamp("ns", tz=data_type.tz)
    return data_type


def _parquet(file: str, schema: pa.Schema, batch_rows: int) -> Iterator[pa.RecordBatch]:
    with pq.ParquetFile(file) as parquet:
        yield from parquet.iter_batches(batch_size=batch_rows)


# JSON lines: orjson, a chunk of lines at a time, values converted per column type


def _jsonl(file: str, schema: pa.Schema, batch_rows: int) -> Iterator[pa.RecordBatch]:
    with _open_binary(file) as stream:
        rows: list[dict[str, Any]] = []
        first_line = 1
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            if not rows:
                first_line = number
            rows.append(_parse_line(line, number, file))
            if len(rows) >= batch_rows:
                yield _rows_to_batch(rows, schema, first_line)
                rows = []
        if rows:
            yield _rows_to_batch(rows, schema, first_line)


@contextlib.contextmanager
def _open_binary(file: str) -> Iterator[IO[bytes]]:
    if file == STDIN:
        yield sys.stdin.buffer
    else:
        with pa.input_stream(file, compression="detect") as stream, contextlib.closing(_LineReader(stream)) as lines:
            yield lines  # type: ignore[misc]


class _LineReader:
    """Lines of a pyarrow input stream (which decompresses ``.gz`` & co. on the fly)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        pending = b""
        while chunk := self._stream.read(1 << 20):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            yield from lines
        if pending:
            yield pending

    def close(self) -> None:
        self._stream.close()


def _parse_line(line: bytes, number: int, file: str) -> dict[str, Any]:
    try:
        row = orjson.loads(line)
    except ValueError as exc:
        raise SchemaMismatchError(f"{file} line {number}: not JSON: {exc}") from None
    if not isinstance(row, dict):
        raise SchemaMismatchError(f"{file} line {number}: expected a JSON object, got {type(row).__name__}")
    return row


def _rows_to_batch(rows: list[dict[str, Any]], schema: pa.Schema, first_line: int) -> pa.RecordBatch:
    names = set(schema.names) | set(META_COLUMNS)
    for index, row in enumerate(rows):
        extra = sorted(set(row) - names)
        if extra:
            raise SchemaMismatchError(
                f"line {first_line + index}: key(s) {extra} are not columns of the table; its columns are {schema.names}"
            )
    arrays = [_column([row.get(field.name) for row in rows], field, first_line) for field in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _column(values: list[Any], field: pa.Field, first_line: int) -> pa.Array:
    convert = _converter(field.type)
    try:
        return pa.array([None if value is None else convert(value) for value in values], type=field.type)
    except (ValueError, TypeError, OverflowError, InvalidOperation, binascii.Error, pa.ArrowException):
        pass
    for index, value in enumerate(values):  # find the culprit for the message
        try:
            pa.array([None if value is None else convert(value)], type=field.type)
        except (ValueError, TypeError, OverflowError, InvalidOperation, binascii.Error, pa.ArrowException) as exc:
            raise SchemaMismatchError(
                f"line {first_line + index}: column {field.name!r}: {value!r} is not a {field.type} ({exc})"
            ) from None
    raise SchemaMismatchError(f"lines from {first_line}: column {field.name!r} does not convert to {field.type}")


def _converter(data_type: pa.DataType) -> Callable[[Any], Any]:
    """JSON has no dates, decimals or bytes: read them from their usual text forms."""
    if pa.types.is_timestamp(data_type):
        return lambda v: datetime.fromisoformat(v) if isinstance(v, str) else v
    if pa.types.is_date(data_type):
        return lambda v: date.fromisoformat(v) if isinstance(v, str) else v
    if pa.types.is_decimal(data_type):
        return lambda v: Decimal(str(v)) if isinstance(v, (str, int, float)) and not isinstance(v, bool) else v
    if pa.types.is_binary(data_type) or pa.types.is_large_binary(data_type):
        return lambda v: base64.b64decode(v, validate=True) if isinstance(v, str) else v
    if pa.types.is_integer(data_type):
        return _integer
    return lambda v: v


def _integer(value: Any) -> Any:
    """Arrow would truncate 2.5 to 2 silently; a whole float (2.0) is fine."""
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{value} is not a whole number")
        return int(value)
    if isinstance(value, bool):
        raise TypeError("a boolean is not an integer")
    return value
