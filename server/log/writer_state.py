"""What one bucket knows of its idempotent writers: the last batches each appended, by sequence.

As Kafka's producer state: a writer (an id from the coordinator) numbers its batches per bucket
from 0 within an epoch. A batch whose sequence the bucket already holds is a retry of a batch that
was appended but whose answer was lost: it is dropped and answered with its original offsets. A
sequence past the next one, or an epoch older than the bucket's, is refused. The state is not a
file of its own: every batch header carries its writer, epoch and sequence, so a restart rebuilds
it by reading the headers of the local segments (recovery replays them, segment by segment). A writer whose batches all left the local log
(uploaded and cleaned) is forgotten and accepted again from any sequence, as Kafka does once it
has expired a producer id.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from lakelog.errors import InvalidRequestError, OutOfOrderSequenceError
from lakelog.record.batch import NO_WRITER, BatchHeader

# Batches remembered per writer: more than one produce request of a writer holds (the client
# sends at most ``MAX_BATCHES_PER_REQUEST`` of them), so a whole retried request is recognised.
BATCHES_REMEMBERED = 1024
# Writers remembered per bucket, the least recently appending forgotten first.
WRITERS_REMEMBERED = 10_000


@dataclass(frozen=True, slots=True)
class AppendedBatch:
    """Where one batch of a writer landed."""

    sequence: int
    base_offset: int
    next_offset: int
    commit_timestamp: int


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
        return cls(first.writer_id, first.writer_epoch, first.batch_sequence, first.batch_sequence + len(headers) - 1)


@dataclass
class _Writer:
    epoch: int
    batches: deque[AppendedBatch] = field(default_factory=lambda: deque(maxlen=BATCHES_REMEMBERED))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].sequence if self.batches else -1


class WriterState:
    """Per writer id, its epoch and last appended batches in one bucket. Not thread-safe: the log
    calls it under its append lock, so a check and the append it allows are one step."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._writers: OrderedDict[int, _Writer] = OrderedDict()

    def replay(self, headers: Iterable[BatchHeader]) -> None:
        """Rebuild from the log: its batch headers, oldest first, one segment after another."""
        for header in headers:
            if header.writer_id != NO_WRITER:
                self._remember(header.writer_id, header.writer_epoch, [header])

    def check(self, batches: WriterBatches) -> Duplicate | None:
        """The original offsets if ``batches`` were appended already, None if they are the next
        ones to append; raises :class:`OutOfOrderSequenceError` for anything else."""
        writer = self._writers.get(batches.writer_id)
        if writer is None:
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

    def _duplicate(self, batches: WriterBatches, writer: _Writer) -> Duplicate:
        by_sequence = {batch.sequence: batch for batch in writer.batches}
        first, last = by_sequence.get(batches.first_sequence), by_sequence.get(batches.last_sequence)
        if first is None or last is None:
            raise OutOfOrderSequenceError(
                f"{self._name}: writer {batches.writer_id} epoch {batches.epoch} resent sequences "
                f"{batches.first_sequence}..{batches.last_sequence}, older than the last "
                f"{len(writer.batches)} this bucket remembers (up to {writer.last_sequence}); their offsets are unknown"
            )
        return Duplicate(first.base_offset, last.next_offset, first.commit_timestamp)

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
                AppendedBatch(header.batch_sequence, header.base_offset, header.next_offset, header.commit_timestamp)
            )
        while len(self._writers) > WRITERS_REMEMBERED:
            self._writers.popitem(last=False)
