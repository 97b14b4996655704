"""The idempotent writers' state as of a bucket's local log start, kept where the log cannot rebuild it.

Writer state is rebuilt from the batch headers of the local segments, so a writer whose batches have
all left the local log (uploaded, then deleted by local retention) would be forgotten by a restart,
and never known to a copy that starts at its leader's local log start. If that copy led next, a
writer retrying such a batch would have it appended twice. As Kafka keeps producer snapshots (and a
follower built from remote storage restores one), a bucket keeps this state as of its local log
start: written when retention moves the start, read back before the segments are replayed, and sent
by a leader to a follower that starts over at its local log start. It holds only what lies below
that offset, so the segments replayed after it never repeat a batch of it.

The file is small and rarely written (once per local retention run that deleted something); the
new one is written before the segments go and the old one removed after, so a crash between leaves
the one that matches the first segment kept. It carries a CRC, and a damaged or missing one costs
only what it would have kept: the log opens with the state its segments hold.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path
from typing import Sequence

from lakelog.errors import CorruptRecordError
from lakelog.record.batch import crc32c
from lakelog.server.log.durable_files import write_atomically
from lakelog.server.log.writer_state import AppendedBatch, WriterEntry, WriterState

logger = logging.getLogger(__name__)

# Named as the segments are, by the offset the state is as of: ``<offset:020d>.writers``.
SUFFIX = ".writers"
_MAGIC = b"LLWS"
_VERSION = 1
# magic, version, the offset the state is as of, writers
_HEAD = struct.Struct(">4sBqI")
# writer id, epoch, batches
_WRITER = struct.Struct(">qiI")
# sequence, base offset, next offset, commit timestamp, CRC
_BATCH = struct.Struct(">iqqqI")
_CRC = struct.Struct(">I")


def encode_writer_snapshot(offset: int, writers: Sequence[WriterEntry]) -> bytes:
    """``writers`` (least recently appending first) as of ``offset``, as bytes with a CRC."""
    parts = [_HEAD.pack(_MAGIC, _VERSION, offset, len(writers))]
    for writer in writers:
        parts.append(_WRITER.pack(writer.writer_id, writer.epoch, len(writer.batches)))
        parts += [_BATCH.pack(b.sequence, b.base_offset, b.next_offset, b.commit_timestamp, b.crc) for b in writer.batches]
    body = b"".join(parts)
    return body + _CRC.pack(crc32c(body))


def decode_writer_snapshot(data: bytes, where: str) -> tuple[int, list[WriterEntry]]:
    """The offset and writers of a snapshot; :class:`CorruptRecordError` naming ``where`` if it is
    not one, or damaged."""
    if len(data) < _HEAD.size + _CRC.size or crc32c(data[: -_CRC.size]) != _CRC.unpack_from(data, len(data) - _CRC.size)[0]:
        raise CorruptRecordError(f"{where}: the writer state snapshot ({len(data)} bytes) fails its CRC")
    magic, version, offset, count = _HEAD.unpack_from(data)
    if magic != _MAGIC or version != _VERSION:
        raise CorruptRecordError(f"{where}: not a writer state snapshot of version {_VERSION} ({magic!r}, version {version})")
    writers = []
    at = _HEAD.size
    try:
        for _ in range(count):
            writer_id, epoch, batches = _WRITER.unpack_from(data, at)
            at += _WRITER.size
            end = at + batches * _BATCH.size
            if end > len(data) - _CRC.size:
                raise struct.error("batches past the end")
            writers.append(WriterEntry(writer_id, epoch, tuple(AppendedBatch(*b) for b in _BATCH.iter_unpack(data[at:end]))))
            at = end
    except struct.error as error:
        raise CorruptRecordError(f"{where}: the writer state snapshot is cut short: {error}") from None
    return offset, writers


def save_writer_snapshot(directory: Path, offset: int, writers: Sequence[WriterEntry]) -> None:
    """Keep ``writers`` as the state as of ``offset`` (none to keep: no file)."""
    if writers:
        write_atomically(_path(directory, offset), encode_writer_snapshot(offset, writers))


def restore_writer_snapshot(directory: Path, offset: int, state: WriterState, name: str) -> None:
    """Restore into ``state`` the snapshot as of ``offset``, where the log's first segment starts;
    any other snapshot file is stale (its segments went, or never came after a crash) and goes."""
    remove_writer_snapshots(directory, keep=offset)
    try:
        data = _path(directory, offset).read_bytes()
    except FileNotFoundError:
        return
    decoded = _checked(data, f"{name} ({_path(directory, offset)})", "writers known only from the local segments")
    if decoded is not None:
        state.restore(decoded[1])
        logger.debug("%s: restored %d idempotent writer(s) as of offset %d", name, len(decoded[1]), decoded[0])


def adopt_writer_snapshot(directory: Path, offset: int, data: bytes, name: str) -> None:
    """Keep a leader's snapshot ``data`` as this copy's own as of ``offset``; a damaged one, or one
    as of another offset, is not kept."""
    decoded = _checked(data, f"{name}: the leader's writers", "this copy knows only the writers of what it copies") if data else None
    if decoded is not None and decoded[0] == offset:
        save_writer_snapshot(directory, offset, decoded[1])


def _checked(data: bytes, where: str, instead: str) -> tuple[int, list[WriterEntry]] | None:
    """The snapshot's offset and writers; None, logged with what is done ``instead``, when damaged."""
    try:
        return decode_writer_snapshot(data, where)
    except CorruptRecordError as error:
        logger.warning("%s; %s", error.message, instead)
        return None


def remove_writer_snapshots(directory: Path, keep: int | None = None) -> None:
    """Delete every snapshot file but the one as of ``keep``."""
    for path in directory.glob(f"*{SUFFIX}"):
        if keep is None or path.stem != f"{keep:020d}":
            path.unlink(missing_ok=True)


def _path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SUFFIX}"
