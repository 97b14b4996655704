"""What one bucket knows of its idempotent writers: the last batches each appended, by sequence.

As Kafka's producer state: a writer (an id from the coordinator) numbers its batches per bucket
from 0 within an epoch. A batch whose sequence the bucket already holds is a retry of a batch that
was appended but whose answer was lost: it is dropped and answered with its original offsets, but
only if it is the same batch (the same CRC, which covers its body and writer fields); a different
batch under a held sequence is refused, so nobody can turn a writer's real batch into a
"duplicate". A sequence past the next one, or an epoch older than the bucket's, is refused.

A writer may have several requests in flight per bucket (as Kafka's idempotent producer): one
that overtook an earlier one waits in the log for it (:meth:`is_ahead`), so batches are appended
in sequence order whatever order the requests arrive in.

A writer is forgotten once it has appended nothing for ``server.writer-id.expiration-time`` (as
Kafka's ``producer.id.expiration.ms``): by age, never by a count that other clients could push.
Every batch header carries its writer, epoch and sequence, so a restart rebuilds the state by
reading the headers of the local segments (recovery replays them, segment by segment), each
writer's age from its last batch's commit timestamp. What lies below the local log start is kept
in a snapshot (:mod:`~lakelog.server.log.writer_snapshot`), restored before the segments replay.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from lakelog.errors import InvalidRequestError, OutOfOrderSequenceError, WriterSequenceConflictError
from lakelog.record.batch import NO_WRITER, BatchHeader

# Batches remembered per writer: more than one produce request of a writer holds (the client
# sends at most ``MAX_BATCHES_PER_REQUEST`` of them), so a whole retried request is recognised.
BATCHES_REMEMBERED = 1024


@dataclass(frozen=True, slots=True)
class AppendedBatch:
    """Where one batch of a writer landed."""

    sequence: int
    base_offset: int
    next_offset: int
    commit_timestamp: int
    crc: int


@dataclass(frozen=True, slots=True)
class WriterEntry:
    """One writer as a snapshot keeps it: its epoch and last batches, oldest first."""

    writer_id: int
    epoch: int
    batches: tuple[AppendedBatch, ...]


@dataclass(frozen=True)
class Duplicate:
    """A request whose batches are all appended already: its original offsets."""

    base_offset: int
    next_offset: int
    commit_timestamp: int


@dataclass(frozen=True)
class WriterBatches:
    """The writer fields shared by the batches of one request, checked to be consecutive."""

    writer_id: int
    epoch: int
    first_sequence: int
    last_sequence: int
    crcs: tuple[int, ...]

    @classmethod
    def of(cls, headers: Sequence[BatchHeader], where: str) -> WriterBatches | None:
        """None when the batches carry no writer; one request is one writer's consecutive batches."""
        first = headers[0]
        for index, header in enumerate(headers):
            if (header.writer_id, header.writer_epoch) != (first.writer_id, first.writer_epoch) or (
                first.writer_id != NO_WRITER and header.batch_sequence != first.batch_sequence + index
            ):
                raise InvalidRequestError(
                    f"{where}: the batches of one append must come from one writer with consecutive sequences; "
                    f"batch {index} has writer {header.writer_id} epoch {header.writer_epoch} sequence "
                    f"{header.batch_sequence} after writer {first.writer_id} epoch {first.writer_epoch} "
                    f"sequence {first.batch_sequence}"
                )
        if first.writer_id == NO_WRITER:
            return None
        if first.writer_epoch < 0 or first.batch_sequence < 0:
            raise InvalidRequestError(
                f"{where}: writer {first.writer_id} sent epoch {first.writer_epoch} sequence {first.batch_sequence}; "
                "neither may be negative"
            )
        return cls(
            first.writer_id,
            first.writer_epoch,
            first.batch_sequence,
            first.batch_sequence + len(headers) - 1,
            tuple(header.crc for header in headers),
        )


@dataclass
class _Writer:
    epoch: int
    batches: deque[AppendedBatch] = field(default_factory=lambda: deque(maxlen=BATCHES_REMEMBERED))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].sequence if self.batches else -1

    @property
    def last_timestamp(self) -> int:
        return self.batches[-1].commit_timestamp if self.batches else -1


class WriterState:
    """Per writer id, its epoch and last appended batches in one bucket, least recently appending
    first. Not thread-safe: the log calls it under its append lock, so a check and the append it
    allows are one step."""

    def __init__(self, name: str, expiration_ms: int) -> None:
        self._name = name
        self._expiration_ms = expiration_ms
        self._writers: OrderedDict[int, _Writer] = OrderedDict()

    def __len__(self) -> int:
        return len(self._writers)

    def replay(self, headers: Iterable[BatchHeader]) -> None:
        """Rebuild from the log: its batch headers, oldest first, one segment after another."""
        for header in headers:
            if header.writer_id != NO_WRITER:
                self._remember(header.writer_id, header.writer_epoch, [header])

    def entries_before(self, offset: int) -> list[WriterEntry]:
        """The state as of ``offset``: each writer's batches that end at or below it, least recently
        appending first; a writer with none there is left out (the log from ``offset`` on has it)."""
        entries = []
        for writer_id, writer in self._writers.items():
            below = tuple(batch for batch in writer.batches if batch.next_offset <= offset)
            if below:
                entries.append(WriterEntry(writer_id, writer.epoch, below))
        return entries

    def restore(self, entries: Iterable[WriterEntry]) -> None:
        """Take ``entries`` (from :meth:`entries_before`) as the state before what is replayed next."""
        for entry in entries:
            writer = self._writers[entry.writer_id] = _Writer(entry.epoch)
            writer.batches.extend(entry.batches)

    def check(self, batches: WriterBatches, pipelined: bool = False) -> Duplicate | None:
        """The original offsets if ``batches`` were appended already, None if they are the next
        ones to append; raises :class:`OutOfOrderSequenceError` for anything else. A writer the
        bucket does not know starts at any sequence, unless ``pipelined`` (sent behind an earlier
        request that has not come)."""
        writer = self._writers.get(batches.writer_id)
        if writer is None:
            if pipelined and batches.first_sequence > 0:
                raise OutOfOrderSequenceError(
                    f"{self._name}: writer {batches.writer_id} epoch {batches.epoch} sent sequence {batches.first_sequence}"
                    " behind an earlier request that never arrived"
                )
            return None
        if batches.epoch < writer.epoch:
            raise OutOfOrderSequenceError(
                f"{self._name}: writer {batches.writer_id} sent epoch {batches.epoch}, older than epoch "
                f"{writer.epoch} it already used here; batches {batches.first_sequence}..{batches.last_sequence} refused"
            )
        if batches.epoch > writer.epoch:
            if batches.first_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"{self._name}: writer {batches.writer_id} opened epoch {batches.epoch} at sequence "
                    f"{batches.first_sequence}, not 0"
                )
            return None
        expected = writer.last_sequence + 1
        if batches.first_sequence == expected:
            return None
        if batches.first_sequence > expected:
            raise OutOfOrderSequenceError(
                f"{self._name}: writer {batches.writer_id} epoch {batches.epoch} sent sequence "
                f"{batches.first_sequence}, expected {expected}: batches {expected}..{batches.first_sequence - 1} "
                f"never arrived"
            )
        return self._duplicate(batches, writer)

    def is_ahead(self, batches: WriterBatches) -> bool:
        """Whether ``batches``, sent behind an earlier request of their writer, follow sequences this
        bucket has not seen yet: the request overtook the earlier one."""
        writer = self._writers.get(batches.writer_id)
        if writer is None:
            return batches.first_sequence > 0
        if batches.epoch > writer.epoch:
            return batches.first_sequence > 0
        return batches.epoch == writer.epoch and batches.first_sequence > writer.last_sequence + 1

    def _duplicate(self, batches: WriterBatches, writer: _Writer) -> Duplicate:
        by_sequence = {batch.sequence: batch for batch in writer.batches}
        first, last = by_sequence.get(batches.first_sequence), by_sequence.get(batches.last_sequence)
        if first is None or last is None:
            raise OutOfOrderSequenceError(
                f"{self._name}: writer {batches.writer_id} epoch {batches.epoch} resent sequences "
                f"{batches.first_sequence}..{batches.last_sequence}, older than the last "
                f"{len(writer.batches)} this bucket remembers (up to {writer.last_sequence}); their offsets are unknown"
            )
        for sequence, crc in enumerate(batches.crcs, batches.first_sequence):
            appended = by_sequence[sequence]
            if appended.crc != crc:
                raise WriterSequenceConflictError(
                    f"{self._name}: writer {batches.writer_id} epoch {batches.epoch} sequence {sequence} was appended "
                    f"at offsets [{appended.base_offset}, {appended.next_offset}) with CRC {appended.crc:#010x}; this "
                    f"batch has CRC {crc:#010x}, so it is not a resend of that batch and is refused"
                )
        return Duplicate(first.base_offset, last.next_offset, first.commit_timestamp)

    def expire(self, now_ms: int) -> int:
        """Forget the writers that appended nothing for the expiration time; how many went."""
        expired = 0
        while self._writers:
            writer = next(iter(self._writers.values()))
            if now_ms - writer.last_timestamp <= self._expiration_ms:
                break
            self._writers.popitem(last=False)
            expired += 1
        return expired

    def appended(self, batches: WriterBatches, headers: Sequence[BatchHeader]) -> None:
        """Record ``headers`` (stamped with their offsets) as appended for ``batches``' writer."""
        self._remember(batches.writer_id, batches.epoch, headers)

    def _remember(self, writer_id: int, epoch: int, headers: Iterable[BatchHeader]) -> None:
        writer = self._writers.get(writer_id)
        if writer is None or epoch > writer.epoch:
            writer = self._writers[writer_id] = _Writer(epoch)
        self._writers.move_to_end(writer_id)
        for header in headers:
            writer.batches.append(
                AppendedBatch(header.batch_sequence, header.base_offset, header.next_offset, header.commit_timestamp, header.crc)
            )
