"""Server-side column projection: which columns a fetch may ask for (the batches themselves are
projected by :mod:`lakelog.record.projection`, as a segment reads them)."""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from lakelog.errors import InvalidRequestError


def check_projection(schema: pa.Schema, fields: Sequence[int], table: str) -> list[int]:
    projected = list(fields)
    for index in projected:
        if not 0 <= index < len(schema):
            raise InvalidRequestError(f"projected field {index} does not exist in {table} ({len(schema)} columns)")
    if len(set(projected)) != len(projected):
        raise InvalidRequestError(f"projected fields {projected} of {table} repeat a column")
    return projected
