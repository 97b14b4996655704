"""How an idempotent writer numbers its batches and how long it keeps trying to deliver them.

As Kafka's idempotent producer: the writer has an id from the coordinator and numbers its batches
per bucket (an epoch and a sequence from 0), stamped in each batch header. A tablet server drops a
batch it already appended and answers with the original offsets, so every retriable failure (the
leader unreachable or moved, a timeout, a connection lost after the request left) can be resent
without duplicating a record: a request is resent unchanged, in order, until it is acknowledged or
``client.writer.delivery-timeout`` has passed since its first failure. A batch given up on may
or may not have been appended, so the bucket moves to a new epoch: the batches queued behind it
are renumbered from 0 and the server accepts them without waiting for the lost sequence.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from lakelog.errors import DeliveryTimeoutError, LakelogError
from lakelog.security.writer_tokens import WriterIdentity
from lakelog.record import batch as rb
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.retry_policy import TRANSPORT_ERRORS

log = logging.getLogger(__name__)

# Batches one produce request carries at most: a tablet server remembers more than this many of a
# writer's last batches (``lakelog.server.log.writer_state.BATCHES_REMEMBERED``), so a resent
# request is always recognised whole.
MAX_BATCHES_PER_REQUEST = 512
# Batches a bucket's requests in flight carry together, the one being sent included: the server
# remembers this many of a writer's last batches, so the oldest, resent, is still recognised.
MAX_BATCHES_IN_FLIGHT = 1024


@dataclass
class BucketSequence:
    """The epoch and next sequence of one bucket of one writer."""

    epoch: int = 0
    next_sequence: int = 0

    def take(self, writer_id: int) -> tuple[int, int, int]:
        """(writer id, epoch, sequence) for the next batch of the bucket."""
        sequence = self.next_sequence
        self.next_sequence += 1
        return writer_id, self.epoch, sequence

    def new_epoch(self, writer_id: int, queued: list[rb.EncodedBatch]) -> list[rb.EncodedBatch]:
        """Start the next epoch and renumber ``queued`` (encoded batches not yet sent) into it."""
        self.epoch = (self.epoch + 1) & 0x7FFF
        self.next_sequence = 0
        return [rb.restamp_writer(data, *self.take(writer_id)) for data in queued]


@dataclass
class DeliveryStats:
    """What a writer's retries amounted to, for a caller that wants to know (tests, benchmarks)."""

    retried_requests: int = 0
    retried_batches: int = 0
    failed_batches: int = 0


class Delivery:
    """The retry decisions of one writer, over every bucket it writes (of any partition)."""

    def __init__(self, identity: WriterIdentity | None, router: LeaderRouter, timeout_s: float) -> None:
        """``identity``: the writer's id and token from the coordinator (None: not idempotent)."""
        self.writer_id = identity.writer_id if identity else rb.NO_WRITER
        self.token = identity.token if identity else b""  # sent with every ProduceLog bucket entry
        self.timeout_s = timeout_s
        self.stats = DeliveryStats()
        self._router = router

    @property
    def idempotent(self) -> bool:
        return self.writer_id != rb.NO_WRITER

    def _resend_safe(self, error: LakelogError) -> bool:
        """A request lost in transport may have been appended: resent only by an idempotent writer.
        Other retriable errors (a full disk, say) are the application's to see, at once."""
        return self.idempotent and isinstance(error, TRANSPORT_ERRORS)

    def _retried(self, error: LakelogError) -> bool:
        return self._router.policy.should_retry(error, self._resend_safe(error))

    def retry_delay_s(self, error: LakelogError, attempt: int, failing_since: float, batches: int, physical_id: int) -> float | None:
        """The wait before resending ``batches`` batches of a bucket of ``physical_id`` (a table
        or a partition) that failed with ``error``, None to give up: not an error resent, or past
        the delivery timeout."""
        delay = self._router.retry_delay_s(error, attempt, resend_safe=self._resend_safe(error), table_id=physical_id)
        if delay is None or time.monotonic() + delay - failing_since > self.timeout_s:
            return None
        self.stats.retried_requests += 1
        self.stats.retried_batches += batches
        return delay

    def dropped(self, physical_id: int, batches: list[rb.EncodedBatch], error: LakelogError) -> None:
        """With ``acks=0``: ``batches`` were refused and are not resent; the next ones go to the
        bucket's new leader if it moved."""
        self.stats.failed_batches += len(batches)
        self._router.refresh_if_moved(error, physical_id)

    def gave_up(self, table: str, bucket: int, batches: list[rb.EncodedBatch], error: LakelogError, attempts: int) -> LakelogError:
        """The error a failed request reaches ``flush()`` with: a retriable one that ran out of time
        becomes a :class:`DeliveryTimeoutError` naming the table (or partition), the bucket and the
        records lost; any other names the table's bucket if the server's message does not."""
        self.stats.failed_batches += len(batches)
        if not self._retried(error):
            return error.naming(f"{table} bucket {bucket}")
        records = sum(rb.read_header(data).record_count for data in batches)
        return DeliveryTimeoutError(
            f"{records} record(s) of {table} bucket {bucket} were not delivered within "
            f"client.writer.delivery-timeout ({self.timeout_s:g} s, {attempts} tries); last error: {error}",
            bucket,
            records,
        )
