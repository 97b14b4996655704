"""A table schema as bytes: an Arrow IPC schema message, how schemas cross the wire and rest in the
coordinator's store."""

from __future__ import annotations

import pyarrow as pa

from lakelog.errors import InvalidRequestError


def schema_to_bytes(schema: pa.Schema) -> bytes:
    return schema.serialize().to_pybytes()


def schema_from_bytes(data: bytes) -> pa.Schema:
    """Parse an Arrow IPC schema message; anything else is a request error, not a server fault."""
    try:
        return pa.ipc.read_schema(pa.py_buffer(data))
    except (pa.ArrowInvalid, OSError, ValueError) as exc:
        raise InvalidRequestError(f"not an Arrow IPC schema ({len(data)} bytes): {exc}") from None
