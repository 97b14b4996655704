"""Arrow batches written as JSON lines, CSV, Parquet or an Arrow IPC stream: what ``lakelog scan
--output`` prints, each format written from Arrow, never a Python object per row.

CSV, Parquet and Arrow use pyarrow's own writers. JSON lines are assembled column by column with
Arrow compute (numbers, booleans and plain strings turned to JSON text in bulk, then one string per
row joined from them); only columns of other types (times, decimals, bytes, nested values) go
through Python values, one ``orjson`` call per value. What each prints matches what ``lakelog
produce`` reads back: times and dates in ISO 8601, decimals as exact strings, bytes as base64.
"""

from __future__ import annotations

import base64
import struct
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any, BinaryIO, Protocol

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from lakelog.errors import InvalidRequestError

OUTPUT_FORMATS = ("jsonl", "csv", "parquet", "arrow")
BINARY_FORMATS = frozenset(("parquet", "arrow"))
FORMAT_THREADS = 2  # JSON text is made on this many threads while the next batch is polled or written
PARQUET_ROW_GROUP_ROWS = 1 << 17  # scan polls are small; row groups this big keep the file readable fast
_OFFSET = struct.Struct("<i")
_NULL = pa.scalar(None, pa.string())
_EMPTY, _WHOLE, _QUOTE = pa.scalar(""), pa.scalar(".0"), pa.scalar('"')


class RecordWriter(Protocol):
    def write(self, batch: pa.RecordBatch) -> None: ...
    def flush(self) -> None:
        """Everything written so far out to the sink, as far as the format allows (after each poll)."""
    def finish(self) -> None: ...


def open_writer(fmt: str, sink: BinaryIO, schema: pa.Schema) -> RecordWriter:
    """A writer of ``fmt`` (one of :data:`OUTPUT_FORMATS`) for batches of ``schema`` into ``sink``."""
    if fmt == "jsonl":
        return JsonLinesWriter(sink)
    if fmt == "csv":
        return CsvWriter(sink, schema)
    if fmt == "parquet":
        return ParquetWriter(sink, schema)
    return ArrowStreamWriter(sink, schema)


class JsonLinesWriter:
    """One JSON object per record, keys in column order. Batches are turned into text on
    :data:`FORMAT_THREADS` threads (Arrow compute releases the GIL) and written in order."""

    def __init__(self, sink: BinaryIO) -> None:
        self._sink = sink
        self._pool = ThreadPoolExecutor(FORMAT_THREADS, thread_name_prefix="lakelog-jsonl")
        self._pending: deque[Future[memoryview]] = deque()

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self._pending.append(self._pool.submit(json_lines, batch))
        while len(self._pending) > FORMAT_THREADS:
            self._sink.write(self._pending.popleft().result())

    def flush(self) -> None:
        while self._pending:
            self._sink.write(self._pending.popleft().result())
        self._sink.flush()

    def finish(self) -> None:
        self.flush()
        self._pool.shutdown()


def json_lines(batch: pa.RecordBatch) -> memoryview:
    """The batch as JSON lines (UTF-8, each ending in a newline): a view of one Arrow buffer."""
    parts: list[Any] = []
    for index, name in enumerate(batch.schema.names):
        parts.append(("{" if index == 0 else ",") + orjson.dumps(name).decode() + ":")
        parts.extend(_json_parts(batch.column(index)))
    parts.append("}\n")
    lines = pc.binary_join_element_wise(*parts, "", null_handling="replace", null_replacement="null")
    _, offsets, values = lines.buffers()
    start = _OFFSET.unpack_from(offsets, 4 * lines.offset)[0]
    end = _OFFSET.unpack_from(offsets, 4 * (lines.offset + len(lines)))[0]
    return memoryview(values)[start:end]


def _json_parts(column: pa.Array) -> list[pa.Array]:
    """String arrays whose concatenation is each value as JSON text (null where the value is null)."""
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return [column.cast(pa.string())]
    if pa.types.is_floating(kind):
        text = column.cast(pa.string())
        if pc.all(pc.is_finite(column)).as_py() is False:
            text = pc.if_else(pc.is_finite(column), text, _NULL)  # JSON has no NaN or infinity: null, as orjson
        # Arrow spells 2.0 "2"; a second part adds ".0", so a whole float stays a float to a JSON reader.
        fractional = pc.or_(pc.match_substring(text, "."), pc.match_substring(text, "e"))
        return [text, pc.fill_null(pc.if_else(fractional, _EMPTY, _WHOLE), _EMPTY)]
    if (pa.types.is_string(kind) or pa.types.is_large_string(kind)) and _printable(column):
        escaped = pc.replace_substring(pc.replace_substring(column, "\\", "\\\\"), '"', '\\"')
        return [pc.binary_join_element_wise(_QUOTE, escaped.cast(pa.string()), _QUOTE, "")]
    values = [None if value is None else orjson.dumps(value, default=_json_default).decode() for value in column.to_pylist()]
    return [pa.array(values, pa.string())]


def _printable(column: pa.Array) -> bool:
    """No control characters, so escaping quotes and backslashes makes JSON; ASCII checked first, it is quicker."""
    return pc.all(pc.ascii_is_printable(column)).as_py() is not False or pc.all(pc.utf8_is_printable(column)).as_py() is not False


def plain_value(value: Any) -> Any:
    """A JSON-ready value: times and dates in ISO 8601, decimals as exact strings, bytes as base64."""
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {key: plain_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain_value(item) for item in value]
    return value


def _json_default(value: Any) -> Any:
    """orjson asks only for the values it has no JSON form for (decimals, bytes)."""
    converted = plain_value(value)
    if converted is value:
        raise TypeError(f"no JSON form for {type(value).__name__}")
    return converted


class _BatchStreamWriter:
    """A pyarrow writer that streams batch by batch (CSV, Arrow IPC); flushed per poll, so ``--follow`` streams."""

    def __init__(self, sink: BinaryIO, writer: Any) -> None:
        self._sink = sink
        self._writer = writer

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def flush(self) -> None:
        self._sink.flush()

    def finish(self) -> None:
        self._writer.close()


class CsvWriter(_BatchStreamWriter):
    """A header line, then one line per record, as Arrow's CSV writer spells values."""

    def __init__(self, sink: BinaryIO, schema: pa.Schema) -> None:
        nested = [field.name for field in schema if pa.types.is_nested(field.type)]
        if nested:
            raise InvalidRequestError(f"CSV has no form for nested column(s) {nested}; use --output jsonl, parquet or arrow")
        super().__init__(sink, pa_csv.CSVWriter(sink, schema))


class ParquetWriter:
    """One Parquet file; polls are gathered into row groups of :data:`PARQUET_ROW_GROUP_ROWS`."""

    def __init__(self, sink: BinaryIO, schema: pa.Schema) -> None:
        self._writer = pq.ParquetWriter(sink, schema)
        self._pending: list[pa.RecordBatch] = []
        self._rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        self._pending.append(batch)
        self._rows += batch.num_rows
        if self._rows >= PARQUET_ROW_GROUP_ROWS:
            self._write_row_group()

    def _write_row_group(self) -> None:
        if self._pending:
            self._writer.write_table(pa.Table.from_batches(self._pending), row_group_size=self._rows)
        self._pending, self._rows = [], 0

    def flush(self) -> None:
        """Nothing: a Parquet file is readable only once its footer is written, by :meth:`finish`."""

    def finish(self) -> None:
        self._write_row_group()
        self._writer.close()


class ArrowStreamWriter(_BatchStreamWriter):
    """An Arrow IPC stream (``.arrows``)."""

    def __init__(self, sink: BinaryIO, schema: pa.Schema) -> None:
        super().__init__(sink, pa.ipc.new_stream(sink, schema))
