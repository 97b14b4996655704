"""The record batch: lakelog's on-disk and on-wire unit.

A batch is a 64-byte header followed by an Arrow IPC stream (schema message + one record batch),
zero-padded to a multiple of 64 bytes::

    offset  size  field
    0       8     base_offset        int64   stamped by the tablet server at append
    8       4     length             int32   bytes after this field
    12      1     magic              int8    format version (2)
    13      8     commit_timestamp   int64   ms since epoch, stamped by the tablet server
    21      4     crc                uint32  CRC-32C of every byte after this field
    25      4     schema_id          int32
    29      2     attributes         int16   bit 0: columns were projected
    31      4     record_count       int32
    35      4     body_length        int32   bytes of the Arrow IPC stream
    39      8     writer_id          int64   idempotent writer id from the coordinator, 0: none
    47      2     writer_epoch       int16   bumped by the writer when it gives up on a batch
    49      4     batch_sequence     int32   per (writer, bucket, epoch), from 0, one per batch
    53      11    reserved           zeros
    64      ...   body               Arrow IPC stream, then zeros up to the next multiple of 64

As in Apache Fluss, the CRC starts after the fields the server stamps, so the producer computes it
once, the server checks it and stores the bytes as received, and every reader checks it again. The
writer fields (as Kafka's producer id, epoch and sequence) sit in format 2's once-reserved bytes,
covered by the CRC; batches written before they existed read as writer 0, which is no writer at all.

Why 64: batches are stored and sent back to back, so with every batch a multiple of 64 bytes long
and its body 64 bytes in, every body in a segment, a remote file or a fetch answer starts on a
64-byte boundary of the buffer holding it. Arrow IPC places each column buffer on an 8-byte
boundary of the body, so decoding in place gives Arrow arrays that compute kernels (Acero) accept
without copying; format 1's 35-byte header left every one of them misaligned.
"""

from __future__ import annotations

import struct
import warnings
from dataclasses import dataclass
from typing import Iterator

import crc32c as _crc32c
import pyarrow as pa

from lakelog.errors import CorruptRecordError, InvalidRecordError, RecordFormatError

MAGIC = 2
ALIGNMENT = 64
HEADER = struct.Struct(">qibqIihiiqhi11x")
HEADER_SIZE = HEADER.size
LOG_OVERHEAD = 12
CRC_START = 25
TIMESTAMP_OFFSET = 13
ATTR_PROJECTED = 0x1
NO_WRITER = 0
# An encoded batch: bytes, or the Arrow buffer the encoder wrote it into (both read as bytes do).
EncodedBatch = bytes | pa.Buffer
_WRITER_OFFSET = 39
_WRITER = struct.Struct(">qhi")
_MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_BASE_OFFSET = struct.Struct(">q")
_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")
_CRC_OFFSET = CRC_START - _CRC.size
_BUFFER_ALIGNMENT = 8  # what Arrow IPC guarantees inside a body, and what compute kernels check
# An IPC message starts with a continuation marker and its metadata length; a stream ends with a marker and 0.
_IPC_PREFIX = struct.Struct("<4si")
_IPC_CONTINUATION = b"\xff\xff\xff\xff"
_IPC_END = _IPC_CONTINUATION + bytes(4)
# Given explicitly: without options pyarrow reads two environment variables per stream it opens.
_IPC_OPTIONS = pa.ipc.IpcWriteOptions()


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    length: int
    magic: int
    commit_timestamp: int
    crc: int
    schema_id: int
    attributes: int
    record_count: int
    body_length: int
    writer_id: int = NO_WRITER
    writer_epoch: int = 0
    batch_sequence: int = 0

    @property
    def size(self) -> int:
        """Bytes the whole batch takes, header and padding included."""
        return LOG_OVERHEAD + self.length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader(*HEADER.unpack_from(buf, pos))


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli, as Kafka and Fluss use) by the ``crc32c`` package: SSE4.2 over three
    interleaved streams, 23 GB/s here against google-crc32c's 4.6 GB/s (a fifth of a local read's
    client time went to the CRC with the latter), the same values, any buffer taken as it is."""
    return _crc32c.crc32c(data)


def encode_batch(
    batch: pa.RecordBatch,
    schema_id: int,
    base_offset: int = 0,
    commit_timestamp: int = -1,
    attributes: int = 0,
    writer: tuple[int, int, int] = (NO_WRITER, 0, 0),
) -> bytes:
    """Serialize an Arrow batch into a lakelog batch with a valid CRC; ``writer`` is its
    (writer id, epoch, sequence)."""
    return encode_batch_buffer(batch, schema_id, base_offset, commit_timestamp, attributes, writer).to_pybytes()


def encode_batch_buffer(
    batch: pa.RecordBatch,
    schema_id: int,
    base_offset: int = 0,
    commit_timestamp: int = -1,
    attributes: int = 0,
    writer: tuple[int, int, int] = (NO_WRITER, 0, 0),
) -> EncodedBatch:
    """:func:`encode_batch` as the Arrow buffer it was written into: a writer sends it as it is,
    one copy of every record fewer. The buffer is allocated at its final size, measured by a first
    pass that copies nothing: a growing output stream would copy each batch again on every
    doubling."""
    body_length = _ipc_stream(pa.MockOutputStream(), batch).size()
    size = HEADER_SIZE + body_length
    out = pa.allocate_buffer(size + -size % ALIGNMENT)
    sink = pa.FixedSizeBufferWriter(out)
    sink.write(bytes(HEADER_SIZE))
    _ipc_stream(sink, batch)
    sink.write(bytes(out.size - sink.tell()))
    # The sink's own buffer, written in place before the one copy out.
    seal(memoryview(out), base_offset, commit_timestamp, schema_id, attributes, batch.num_rows, body_length, writer)
    return out


def _ipc_stream(sink: pa.NativeFile, batch: pa.RecordBatch) -> pa.NativeFile:
    """``batch`` written to ``sink`` as an Arrow IPC stream of its own."""
    with pa.ipc.new_stream(sink, batch.schema, options=_IPC_OPTIONS) as stream:
        stream.write_batch(batch)
    return sink


def seal(
    view: memoryview,
    base_offset: int,
    commit_timestamp: int,
    schema_id: int,
    attributes: int,
    record_count: int,
    body_length: int,
    writer: tuple[int, int, int] = (NO_WRITER, 0, 0),
) -> None:
    """Write the header into the first bytes of ``view``, a whole batch whose body is in place,
    and its CRC over the rest."""
    HEADER.pack_into(
        view, 0, base_offset, len(view) - LOG_OVERHEAD, MAGIC, commit_timestamp, 0, schema_id, attributes,
        record_count, body_length, *writer,
    )
    _CRC.pack_into(view, _CRC_OFFSET, crc32c(view[CRC_START:]))


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> int:
    return crc32c(memoryview(buf)[pos + CRC_START : pos + header.size])


def restamp_writer(data: EncodedBatch, writer_id: int, epoch: int, sequence: int) -> bytes:
    """A copy of one encoded batch under another writer epoch and sequence, its CRC recomputed:
    what a writer does to the batches queued behind one it gave up on."""
    out = bytearray(data)
    _WRITER.pack_into(out, _WRITER_OFFSET, writer_id, epoch, sequence)
    _CRC.pack_into(out, _CRC_OFFSET, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def stamp(buf: bytearray, pos: int, base_offset: int, commit_timestamp: int) -> None:
    """Write the server-assigned fields in place; the CRC does not cover them."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)
    _TIMESTAMP.pack_into(buf, pos + TIMESTAMP_OFFSET, commit_timestamp)


def iter_headers(
    buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Walk the complete batches in ``buf[pos:end]``; a trailing partial batch is not yielded."""
    end = len(buf) if end is None else end
    while pos + HEADER_SIZE <= end:
        header = read_header(buf, pos)
        if header.length < _MIN_LENGTH or pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def check_format(header: BatchHeader, where: str) -> None:
    """Refuse a batch of an older format version: its files were written by an older lakelog and
    are neither corrupt (so never truncated away) nor readable by this one."""
    if 0 < header.magic < MAGIC:
        raise RecordFormatError(
            f"{where}: batch at offset {header.base_offset} is in record format version {header.magic}; "
            f"this lakelog reads format version {MAGIC} only (files of an older lakelog must be rewritten)"
        )


def validate(buf: bytes | bytearray | memoryview, pos: int, where: str) -> BatchHeader:
    """Check one batch's header and CRC; ``where`` names the file or bucket for the error."""
    if pos + HEADER_SIZE > len(buf):
        raise CorruptRecordError(f"{where}: truncated batch header")
    header = read_header(buf, pos)
    check_format(header, where)
    if header.magic != MAGIC:
        raise CorruptRecordError(f"{where}: bad magic {header.magic} in batch at offset {header.base_offset}")
    if header.length < _MIN_LENGTH or pos + header.size > len(buf):
        raise CorruptRecordError(
            f"{where}: batch at offset {header.base_offset} has length {header.length} past the end"
        )
    if header.size % ALIGNMENT or not 0 <= header.size - HEADER_SIZE - header.body_length < ALIGNMENT:
        raise CorruptRecordError(
            f"{where}: batch at offset {header.base_offset} has size {header.size} and body length "
            f"{header.body_length}, not a body padded to a multiple of {ALIGNMENT} bytes"
        )
    if header.record_count <= 0:
        raise CorruptRecordError(
            f"{where}: batch at offset {header.base_offset} has record count {header.record_count}"
        )
    actual = compute_crc(buf, pos, header)
    if actual != header.crc:
        raise CorruptRecordError(
            f"{where}: CRC mismatch in batch at offset {header.base_offset}: "
            f"stored {header.crc:#010x}, computed {actual:#010x}"
        )
    return header


def body(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> pa.Buffer:
    """The Arrow IPC stream of the batch at ``pos``, as a view of ``buf`` when ``buf`` sits on an
    8-byte boundary in memory (then so does every Arrow buffer decoded from it); otherwise as an
    aligned copy, with a warning (shown once per caller by Python's default filter), since
    misaligned arrays are slow or refused by compute kernels and the caller can do better."""
    start = pos + HEADER_SIZE
    view = pa.py_buffer(memoryview(buf)[start : start + header.body_length])
    if view.address % _BUFFER_ALIGNMENT == 0:
        return view
    warnings.warn(
        f"record batch bodies arrive in memory not aligned to {_BUFFER_ALIGNMENT} bytes; copying each",
        RuntimeWarning,
        stacklevel=2,
    )
    aligned = pa.allocate_buffer(view.size)
    memoryview(aligned)[:] = memoryview(view)
    return aligned


class BodyDecoder:
    """Decodes the Arrow bodies of batches that share a schema, parsing their schema message once.

    Every body is a whole IPC stream: schema message, record batch message, end-of-stream marker.
    Opening a stream reader per batch re-parses the schema each time, which costs more than the
    batch itself for small batches; here a body whose schema message is byte-equal to the last one
    seen has only its batch message read. Anything else (dictionaries, another layout, damage)
    goes through a full stream reader, which decodes it or says what is wrong.
    """

    def __init__(self) -> None:
        self._schema_message = b""
        self._schema: pa.Schema | None = None

    def decode(self, buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> pa.RecordBatch:
        """The Arrow batch inside a lakelog batch (zero-copy over an aligned ``buf``)."""
        stream = body(buf, pos, header)
        view = memoryview(stream).cast("B")  # an Arrow buffer's view is of signed bytes, unequal to bytes
        split = _schema_message_end(view)
        if split:
            try:
                return self._decode_batch_message(stream, view, split)
            except (pa.ArrowInvalid, _NotOneBatch):
                pass
        return _decode_stream(stream, header)

    def _decode_batch_message(self, stream: pa.Buffer, view: memoryview, split: int) -> pa.RecordBatch:
        if self._schema is None or view[:split] != self._schema_message:
            self._schema = pa.ipc.read_schema(stream.slice(0, split))
            self._schema_message = bytes(view[:split])
        message = pa.ipc.read_message(stream.slice(split))
        body_size = 0 if message.body is None else message.body.size
        end = split + _IPC_PREFIX.size + message.metadata.size + body_size
        if message.type != "record batch" or view[end:] != _IPC_END:
            raise _NotOneBatch
        return pa.ipc.read_record_batch(message, self._schema)


class _NotOneBatch(Exception):
    """A body that is not exactly schema, one record batch, end: left to the full stream reader."""


def _schema_message_end(view: memoryview) -> int:
    """Where the schema message opening an IPC stream ends, 0 if the stream does not open with one
    in the usual framing (continuation marker, length) or nothing follows it."""
    if len(view) <= _IPC_PREFIX.size:
        return 0
    marker, length = _IPC_PREFIX.unpack_from(view)
    end = _IPC_PREFIX.size + length
    return end if marker == _IPC_CONTINUATION and 0 < length and end < len(view) else 0


def schema_message(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bytes | None:
    """The bytes of the schema message opening the batch's body (equal bytes, equal schemas), None
    when the body does not open with one in the usual framing: a cheap key for a schema check."""
    view = memoryview(buf)[pos + HEADER_SIZE : pos + HEADER_SIZE + header.body_length]
    end = _schema_message_end(view)
    return bytes(view[:end]) if end else None


def check_body(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader, schema: pa.Schema, where: str) -> None:
    """Refuse a batch whose Arrow body disagrees with its header, before it is stored: exactly one
    record batch of ``header.record_count`` rows, every buffer inside the body and every value
    valid (offsets, UTF-8), nothing after the end-of-stream marker.

    The CRC only proves the bytes are the producer's; a producer that lies in its header (a record
    count that disagrees, two batches in one body) would otherwise poison the bucket for every
    reader: offsets overlap, or a reader cannot get past the batch. ``schema`` is the batch's own,
    already checked against the table's."""
    start = pos + HEADER_SIZE
    # Checked where it lies (a received request sits on no boundary in particular): nothing decoded
    # here is kept, so the aligned copy that :func:`body` makes for readers is not needed.
    stream = pa.py_buffer(memoryview(buf)[start : start + header.body_length])
    view = memoryview(stream).cast("B")
    split = _schema_message_end(view)
    try:
        message = pa.ipc.read_message(stream.slice(split)) if split else None
        if message is not None and message.type == "record batch":
            end = split + _IPC_PREFIX.size + message.metadata.size + (0 if message.body is None else message.body.size)
            if view[end:] != _IPC_END:
                raise InvalidRecordError(f"{where}: batch at byte {pos} holds more than one Arrow record batch")
            batches = [pa.ipc.read_record_batch(message, schema)]
        else:  # dictionaries or another framing: the full stream reader
            batches = list(pa.ipc.open_stream(stream))
        for batch in batches:
            batch.validate(full=True)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InvalidRecordError(f"{where}: batch at byte {pos} has an Arrow body that does not decode: {exc}") from None
    if len(batches) != 1:
        raise InvalidRecordError(f"{where}: batch at byte {pos} holds {len(batches)} Arrow record batches, not 1")
    if batches[0].num_rows != header.record_count:
        raise InvalidRecordError(
            f"{where}: batch at byte {pos} says it holds {header.record_count} records, its Arrow body holds {batches[0].num_rows}"
        )


def _decode_stream(stream: pa.Buffer, header: BatchHeader) -> pa.RecordBatch:
    batches = list(pa.ipc.open_stream(stream))
    if len(batches) != 1:
        raise CorruptRecordError(f"batch at offset {header.base_offset} holds {len(batches)} Arrow batches, not 1")
    return batches[0]


def decode_body(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> pa.RecordBatch:
    """The Arrow batch inside one lakelog batch (zero-copy over an aligned ``buf``)."""
    return BodyDecoder().decode(buf, pos, header)


def decode_schema(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> pa.Schema:
    """The batch's schema, from its schema message alone when the body opens with one (a copy of
    a few hundred bytes: ``buf`` may be a received message, on no boundary in particular)."""
    message = schema_message(buf, pos, header)
    if message is not None:
        return pa.ipc.read_schema(pa.py_buffer(message))
    return pa.ipc.open_stream(body(buf, pos, header)).schema
