"""Column projection of stored batches: a new batch of some columns, from only those columns' bytes.

A reader that wants one column of ten should cost the server a tenth of a full read. Decoding each
batch, selecting and re-encoding it reads every byte; instead, as Apache Fluss's
``FileLogProjection`` does, the batch's Arrow metadata says where each column's buffers lie in the
body, and only the header, the metadata and the kept columns' buffers are read from the file. A
column's buffers (its children's included) are contiguous in the body, so each kept column is one
read, placed in the new body on the same 8-byte boundaries it had.

The new batch keeps the base offset, commit timestamp and schema id, is marked projected, and gets
its own CRC, so a reader checks it like any other batch. Bodies this does not lay out (compressed
buffers, dictionaries, union and view types) are decoded, selected and re-encoded instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import pyarrow as pa

from lakelog.errors import CorruptRecordError
from lakelog.record import batch as rb
from lakelog.record.ipc_message import message_length, read_record_batch_message, write_record_batch_message

# Fills the view with the bytes of the file at the position (a pread into memory).
ReadInto = Callable[[memoryview, int], None]

# Bytes read ahead of a batch's header in one read: the header, the schema and the batch's metadata
# of a table of a few dozen columns.
PREFIX_BYTES = 4096
_END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"


@dataclass(frozen=True, slots=True)
class _Layout:
    """Of one schema projected: the kept columns' schema message, and per kept column the indexes
    of its nodes and its buffers in the batch message."""

    schema_message: bytes
    columns: list[tuple[range, range]]


@dataclass(frozen=True, slots=True)
class _Plan:
    """How a body is projected, the same for every body whose schema and batch messages are
    byte-equal (a producer's batches of one size and no new nulls)."""

    schema_message: bytes
    batch_message: bytes
    body_length: int
    # (place in the stored body, place in the new body, length) per kept column.
    copies: list[tuple[int, int, int]]
    # Body bytes the stored batch message says follow it.
    source_body_length: int

    @property
    def size(self) -> int:
        stream = len(self.schema_message) + len(self.batch_message) + self.body_length + len(_END_OF_STREAM)
        return rb.HEADER_SIZE + stream + -(rb.HEADER_SIZE + stream) % rb.ALIGNMENT


@dataclass(frozen=True, slots=True)
class ProjectedBatch:
    """A projected batch planned from its stored batch's metadata, whose body starts at byte
    ``body_at`` of the file: ``size`` bytes once written."""

    header: rb.BatchHeader
    plan: _Plan
    body_at: int

    @property
    def size(self) -> int:
        return self.plan.size

    def write(self, view: memoryview, read_into: ReadInto) -> None:
        """Write the batch into ``view``: ``size`` zeroed bytes (the padding stays zero)."""
        plan = self.plan
        at = rb.HEADER_SIZE
        for piece in (plan.schema_message, plan.batch_message):
            view[at : at + len(piece)] = piece
            at += len(piece)
        for source, place, length in plan.copies:
            read_into(view[at + place : at + place + length], self.body_at + source)
        end = at + plan.body_length
        view[end : end + len(_END_OF_STREAM)] = _END_OF_STREAM
        header = self.header
        rb.seal(
            view, header.base_offset, header.commit_timestamp, header.schema_id, header.attributes | rb.ATTR_PROJECTED,
            header.record_count, end + len(_END_OF_STREAM) - rb.HEADER_SIZE,
        )


class BatchProjection:
    """Projects batches onto ``fields`` (column indexes of the table's current schema, in that
    order), remembering the layout of each schema it meets and the plan of the last batch message.
    A batch written under an older schema has only a prefix of the current columns: it keeps the
    wanted ones it has, and the reader fills the others with nulls."""

    def __init__(self, fields: Sequence[int]) -> None:
        self.fields = list(fields)
        self._layouts: dict[bytes, _Layout | None] = {}
        self._last: tuple[bytes, bytes, _Plan | None] = (b"", b"", None)

    def plan(self, prefix: bytes, position: int, header: rb.BatchHeader, read_into: ReadInto) -> ProjectedBatch | None:
        """The projected batch of the stored one at ``position`` whose first bytes are ``prefix``;
        None when its body is not one this lays out (then :meth:`project_decoded` it)."""
        body_end = rb.HEADER_SIZE + header.body_length
        schema_end = rb.HEADER_SIZE + message_length(_part(prefix, position, rb.HEADER_SIZE, rb.HEADER_SIZE + 8, read_into))
        if schema_end + 8 > body_end:
            return None
        batch_end = schema_end + message_length(_part(prefix, position, schema_end, schema_end + 8, read_into))
        schema_message = _part(prefix, position, rb.HEADER_SIZE, schema_end, read_into)
        batch_message = _part(prefix, position, schema_end, batch_end, read_into)
        last_schema, last_batch, plan = self._last
        if schema_message != last_schema or batch_message != last_batch:
            plan = self._plan(schema_message, batch_message)
            self._last = (schema_message, batch_message, plan)
        if plan is None or batch_end + plan.source_body_length > body_end:
            return None
        return ProjectedBatch(header, plan, position + batch_end)

    def _plan(self, schema_message: bytes, batch_message: bytes) -> _Plan | None:
        layout = self._layout(schema_message)
        if layout is None:
            return None
        message = read_record_batch_message(batch_message)
        if not message.plain:
            return None
        nodes: list[tuple[int, int]] = []
        buffers: list[tuple[int, int]] = []
        copies = []
        cursor = 0
        for node_span, buffer_span in layout.columns:
            if node_span.stop > len(message.nodes) or buffer_span.stop > len(message.buffers):
                return None
            nodes += message.nodes[node_span.start : node_span.stop]
            spans = message.buffers[buffer_span.start : buffer_span.stop]
            used = [(offset, length) for offset, length in spans if length]
            low = min((offset for offset, _ in used), default=0)
            high = max((offset + length for offset, length in used), default=0)
            if low % 8 or low < 0 or high > message.body_length:
                return None
            buffers += [(cursor + offset - low if length else cursor, length) for offset, length in spans]
            if high > low:
                copies.append((low, cursor, high - low))
            cursor += high - low + -(high - low) % 8
        batch = write_record_batch_message(message.length, nodes, buffers, cursor)
        return _Plan(layout.schema_message, batch, cursor, copies, message.body_length)

    def project_decoded(self, buf: bytes | memoryview, pos: int, header: rb.BatchHeader) -> bytes:
        """The batch at ``pos`` of ``buf`` decoded, its columns selected and encoded again."""
        try:
            decoded = rb.decode_body(buf, pos, header)
            projected = decoded.select(present(self.fields, decoded.num_columns))
        except pa.ArrowException as error:
            raise CorruptRecordError(f"batch at offset {header.base_offset} is not Arrow IPC this can read: {error}") from None
        return rb.encode_batch(
            projected, header.schema_id, base_offset=header.base_offset, commit_timestamp=header.commit_timestamp,
            attributes=header.attributes | rb.ATTR_PROJECTED,
        )

    def _layout(self, schema_message: bytes) -> _Layout | None:
        if schema_message not in self._layouts:
            self._layouts[schema_message] = _layout(schema_message, self.fields)
        return self._layouts[schema_message]


def present(fields: list[int], columns: int) -> list[int]:
    """Of ``fields``, those a batch of ``columns`` columns has."""
    return [field for field in fields if field < columns]


def _part(prefix: bytes, position: int, start: int, end: int, read_into: ReadInto) -> bytes:
    """Bytes ``[start, end)`` of the batch at ``position``: from ``prefix`` when it holds them."""
    if end <= len(prefix):
        return prefix[start:end]
    out = bytearray(end - start)
    read_into(memoryview(out), position + start)
    return bytes(out)


def _layout(schema_message: bytes, fields: list[int]) -> _Layout | None:
    try:
        schema = pa.ipc.read_schema(pa.py_buffer(schema_message))
    except pa.ArrowException:
        return None
    fields = present(fields, len(schema))
    spans = []
    node = buffer = 0
    for field in schema:
        counts = _counts(field.type)
        if counts is None:
            return None
        spans.append((range(node, node + counts[0]), range(buffer, buffer + counts[1])))
        node, buffer = node + counts[0], buffer + counts[1]
    kept = pa.schema([schema.field(i) for i in fields], metadata=schema.metadata)
    return _Layout(kept.serialize().to_pybytes(), [spans[i] for i in fields])


def _counts(kind: pa.DataType) -> tuple[int, int] | None:
    """Nodes and buffers an array of ``kind`` takes in a record batch message (Arrow's columnar
    format, IPC version 5), children included; None for a kind not laid out here."""
    types = pa.types
    if types.is_null(kind):
        return 1, 0
    if any(check(kind) for check in (types.is_boolean, types.is_integer, types.is_floating, types.is_decimal, types.is_temporal, types.is_fixed_size_binary)):
        return 1, 2
    if any(check(kind) for check in (types.is_binary, types.is_string, types.is_large_binary, types.is_large_string)):
        return 1, 3
    if types.is_map(kind):
        children = [_counts(kind.key_type), _counts(kind.item_type)]
        own = [(1, 2), (1, 1)]  # the map's offsets, then its struct of entries
    elif types.is_list(kind) or types.is_large_list(kind):
        children, own = [_counts(kind.value_type)], [(1, 2)]
    elif types.is_fixed_size_list(kind):
        children, own = [_counts(kind.value_type)], [(1, 1)]
    elif types.is_struct(kind):
        children, own = [_counts(kind.field(i).type) for i in range(kind.num_fields)], [(1, 1)]
    else:
        return None
    if any(child is None for child in children):
        return None
    every = own + children
    return sum(nodes for nodes, _ in every), sum(buffers for _, buffers in every)
