"""A bad CSV file told the way its user reads it: the 1-based line, the column's name, and a hint.

Arrow's CSV reader says ``In CSV column #2: CSV conversion error to double: invalid value 'xx'``
(0-based, no line) and takes a file without a header row as one whose columns are named by its
first row's values. Such an error ends the command, so the file is read once more here, with
Python's csv module, to find the line.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Callable, Iterator

import pyarrow as pa

from lakelog.errors import SchemaMismatchError

_CONVERSION = re.compile(r"In CSV column #(\d+): CSV conversion error to (.+?): invalid value '(.*)'", re.S)
_PARSE = re.compile(r"CSV parse error: (Expected \d+ columns, got \d+): (.*)", re.S)


def delimiter_hint(delimiter: str) -> str:
    return f"if its fields are not separated by {delimiter!r}, pass --delimiter"


def check_header(header: list[str], table_columns: list[str], ignored: frozenset[str], label: str, delimiter: str) -> None:
    """The first line must name the table's columns; say so when it names others."""
    unknown = [name for name in header if name not in table_columns and name not in ignored]
    if unknown:
        raise SchemaMismatchError(
            f"{label} line 1: the header row names column(s) {unknown} that are not in the table (its columns are "
            f"{table_columns}); the first line must be a header row naming the columns, and {delimiter_hint(delimiter)}"
        )


def explain(error: pa.ArrowInvalid, label: str, path: str | None, header: list[str] | None, delimiter: str) -> SchemaMismatchError:
    """``error`` of Arrow's CSV reader on ``path`` (None: stdin, which cannot be read twice), with
    the line and the column name it leaves out. ``header``: the file's columns, when Arrow read them."""
    text = str(error)
    conversion = _CONVERSION.search(text)
    if conversion:
        index, type_name, value = int(conversion[1]), conversion[2], conversion[3]
        header = header or next(_rows(path, delimiter), (0, []))[1]
        column = repr(header[index]) if index < len(header) else str(index + 1)
        line = _first_line(path, delimiter, lambda fields: len(fields) > index and fields[index] == value)
        return SchemaMismatchError(f"{label}{line}, column {column}: {value!r} is not a {type_name}")
    parse = _PARSE.search(text)
    if parse:
        row = parse[2].rstrip("\r\n")
        line = _first_line(path, delimiter, lambda fields: delimiter.join(fields) == row)
        return SchemaMismatchError(f"{label}{line}: {parse[1].lower()} ({row!r}); {delimiter_hint(delimiter)}")
    return SchemaMismatchError(f"cannot read {label} as csv: {text.splitlines()[0]}")


def _first_line(path: str | None, delimiter: str, matches: Callable[[list[str]], bool]) -> str:
    """`` line N`` of the first row after the header that ``matches``; empty when none does."""
    rows = _rows(path, delimiter)
    next(rows, None)
    return next((f" line {number}" for number, fields in rows if matches(fields)), "")


def _rows(path: str | None, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """(1-based line number, fields) of each row; none for stdin."""
    if path is None:
        return
    with pa.input_stream(path, compression="detect") as stream, io.TextIOWrapper(stream, encoding="utf-8", newline="") as text:
        reader = csv.reader(text, delimiter=delimiter)
        for fields in reader:
            yield reader.line_num, fields
