"""The schema text of ``lakelog table create --schema``: ``id:int64,name:string,amount:decimal(10,2)``.

A command line needs a schema one can type, and ``table describe`` prints the same text back, so
:func:`format_schema` is the inverse of :func:`parse_schema` (a schema copied from ``describe``
creates the same table). A column is ``name:type`` with an optional ``not null`` suffix; commas
inside ``(...)`` and ``[...]`` belong to the type, not to the column list.
"""

from __future__ import annotations

import re
from typing import Callable

import pyarrow as pa

from lakelog.errors import InvalidTableError

_SIMPLE: dict[str, Callable[[], pa.DataType]] = {
    "int8": pa.int8, "int16": pa.int16, "int32": pa.int32, "int64": pa.int64,
    "uint8": pa.uint8, "uint16": pa.uint16, "uint32": pa.uint32, "uint64": pa.uint64,
    "float32": pa.float32, "float64": pa.float64,
    "bool": pa.bool_, "string": pa.string, "binary": pa.binary, "date32": pa.date32,
}
# The names other tools (SQL, Arrow's own str(), Spark) use for the same types.
_ALIASES = {
    "tinyint": "int8", "smallint": "int16", "int": "int32", "integer": "int32", "bigint": "int64", "long": "int64",
    "float": "float32", "double": "float64", "boolean": "bool", "str": "string", "utf8": "string",
    "bytes": "binary", "date": "date32", "date32[day]": "date32",
}
_TIMESTAMP = re.compile(r"timestamp\[\s*(s|ms|us|ns)\s*(?:,\s*(?:tz\s*=\s*)?([^\]\s]+)\s*)?\]", re.IGNORECASE)
_DECIMAL = re.compile(r"decimal(?:128|256)?\(\s*(\d+)\s*,\s*(-?\d+)\s*\)", re.IGNORECASE)
_NOT_NULL = re.compile(r"\s+not\s+null$", re.IGNORECASE)
KNOWN_TYPES = (*_SIMPLE, "timestamp[ms|us|s|ns]", "timestamp[ms, tz=UTC]", "decimal(p,s)")


def parse_type(text: str, column: str = "") -> pa.DataType:
    """One type name; raises :class:`InvalidTableError` naming the type (and column) it cannot read."""
    name = text.strip()
    lowered = _ALIASES.get(name.lower(), name.lower())
    if lowered in _SIMPLE:
        return _SIMPLE[lowered]()
    match = _TIMESTAMP.fullmatch(name)  # matched on the original text: a zone name keeps its case
    if match:
        return pa.timestamp(match.group(1).lower(), tz=match.group(2))
    match = _DECIMAL.fullmatch(name)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        if not 1 <= precision <= 76:
            raise InvalidTableError(f"decimal precision must be 1..76, got {text!r}{_for(column)}")
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    raise InvalidTableError(f"unknown type {name!r}{_for(column)}; known types: {', '.join(KNOWN_TYPES)}")


def parse_schema(text: str) -> pa.Schema:
    """``name:type[ not null],...`` -> an Arrow schema (nullable columns unless ``not null``)."""
    fields = []
    for item in _split_top_level(text):
        name, sep, type_text = item.partition(":")
        name = name.strip()
        if not sep or not name or not type_text.strip():
            raise InvalidTableError(f"schema column {item.strip()!r} is not NAME:TYPE (e.g. id:int64,name:string)")
        nullable = _NOT_NULL.search(type_text) is None
        fields.append(pa.field(name, parse_type(_NOT_NULL.sub("", type_text), name), nullable=nullable))
    if not fields:
        raise InvalidTableError("the schema is empty; give NAME:TYPE,... (e.g. id:int64,name:string)")
    return pa.schema(fields)


def format_type(data_type: pa.DataType) -> str:
    """The text :func:`parse_type` reads back as ``data_type`` (Arrow's own name otherwise)."""
    if pa.types.is_timestamp(data_type):
        return f"timestamp[{data_type.unit}, tz={data_type.tz}]" if data_type.tz else f"timestamp[{data_type.unit}]"
    if pa.types.is_decimal(data_type):
        return f"decimal({data_type.precision},{data_type.scale})"
    for name, factory in _SIMPLE.items():
        if data_type == factory():
            return name
    return str(data_type)


def format_schema(schema: pa.Schema) -> str:
    return ",".join(f"{f.name}:{format_type(f.type)}{'' if f.nullable else ' not null'}" for f in schema)


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside brackets, so ``decimal(10,2)`` and ``timestamp[ms, tz=UTC]`` stay whole."""
    items, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:index])
            start = index + 1
    items.append(text[start:])
    return [item for item in items if item.strip()]


def _for(column: str) -> str:
    return f" for column {column!r}" if column else ""
