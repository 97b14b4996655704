"""Server-side column projection: fewer bytes on the wire for a reader that wants fewer columns.

Projection is the one case where a fetch re-encodes batches; the result keeps each batch's base
offset and commit timestamp and gets a fresh CRC, so a reader checks it like any other batch.
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from lakelog.errors import InvalidRequestError
from lakelog.record import batch as rb


def check_projection(schema: pa.Schema, fields: Sequence[int], table: str) -> list[int]:
    projected = list(fields)
    for index in projected:
        if not 0 <= index < len(schema):
            raise InvalidRequestError(f"projected field {index} does not exist in {table} ({len(schema)} columns)")
    if len(set(projected)) != len(projected):
        raise InvalidRequestError(f"projected fields {projected} of {table} repeat a column")
    return projected


def project_records(records: bytes | memoryview, fields: Sequence[int]) -> bytearray:
    """Re-encode every batch in ``records`` with only ``fields`` (column indexes, in that order)."""
    out = bytearray()
    for pos, header in rb.iter_headers(records):
        projected = rb.decode_body(records, pos, header).select(list(fields))
        out += rb.encode_batch(
            projected,
            header.schema_id,
            base_offset=header.base_offset,
            commit_timestamp=header.commit_timestamp,
            attributes=header.attributes | rb.ATTR_PROJECTED,
        )
    return out
