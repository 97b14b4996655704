"""Every local bucket log of one tablet server, under ``<root>/<table_id>/<bucket>/``, and for a
partition of a partitioned table under ``<root>/<table_id>/p<partition_id>/<bucket>/``.

Logs are keyed by ``(physical id, bucket)``: the table's id, or the partition's (the coordinator
draws both from one sequence, see ``TableInfo.physical_id``)."""

from __future__ import annotations

import logging
import shutil
import threading
from functools import partial
from pathlib import Path
from typing import Callable

from lakelog.errors import LakelogError, StorageError
from lakelog.server.log.acknowledged_offset import AcknowledgedOffsetCheckpoint
from lakelog.server.log.log_tablet import LogConfig, LogTablet, wall_clock_ms
from lakelog.server.log.sequence_waits import SequenceWaits

logger = logging.getLogger(__name__)


class LogManager:
    """Opens, finds, rolls by age and drops the :class:`LogTablet` of each bucket; thread-safe.

    ``on_high_watermark(table_id, bucket)`` is called, outside every lock, each time a bucket's
    high watermark advances; ``clock`` (ms since the epoch) stamps commit timestamps.
    """

    def __init__(
        self,
        root: Path,
        config: LogConfig,
        on_high_watermark: Callable[[int, int], None] | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.root = root
        self.config = config
        self._on_high_watermark = on_high_watermark
        self._clock = clock
        self._lock = threading.Lock()
        self._tablets: dict[tuple[int, int], LogTablet] = {}
        self._sequence_waits = SequenceWaits()  # every bucket's appends waiting for an earlier sequence
        self._acknowledged = AcknowledgedOffsetCheckpoint(root)

    @staticmethod
    def partition_dir(partition_id: int) -> str:
        return f"p{partition_id}"

    def _open(self, table_id: int, bucket: int, table_name: str, parent: Path) -> LogTablet:
        """Open one bucket's log. Lock held, so two callers never open the same directory."""
        callback = None if self._on_high_watermark is None else partial(self._on_high_watermark, table_id, bucket)
        try:
            tablet = LogTablet.open(
                parent / str(bucket),
                self.config,
                bucket,
                f"{table_name} bucket {bucket}",
                on_high_watermark=callback,
                clock=self._clock,
                sequence_waits=self._sequence_waits,
                acknowledged=self._acknowledged.bucket,
            )
        except OSError as exc:  # a file of the log that cannot be opened: out of open files, or of disk
            raise StorageError(f"cannot open the log of {table_name} bucket {bucket}: {exc}") from exc
        self._tablets[table_id, bucket] = tablet
        return tablet

    def get_or_create(self, table_id: int, bucket: int, name: str, partition_of: int | None = None) -> LogTablet:
        """The log of a bucket, opened (and recovered) on first use; ``name`` is the table's name,
        e.g. "shop.orders", used in errors and logs. With ``partition_of`` (the table's id),
        ``table_id`` is the id of a partition of that table."""
        with self._lock:
            tablet = self._tablets.get((table_id, bucket))
            if tablet is not None:
                return tablet
            parent = self.root / str(table_id) if partition_of is None else self.root / str(partition_of) / self.partition_dir(table_id)
            return self._open(table_id, bucket, name, parent)

    @property
    def clock(self) -> Callable[[], int]:
        """The clock commit timestamps are stamped with (ms since the epoch)."""
        return self._clock

    def barrier_safe_time(self) -> int:
        """The smallest :meth:`LogTablet.barrier_safe_time` over the open logs (the clock minus 1
        ms when none is open): a time every log of this server has passed."""
        with self._lock:
            tablets = list(self._tablets.values())
        return min((tablet.barrier_safe_time() for tablet in tablets), default=self._clock() - 1)

    def get(self, table_id: int, bucket: int) -> LogTablet | None:
        with self._lock:
            return self._tablets.get((table_id, bucket))

    def drop_table(self, table_id: int) -> None:
        """Close every bucket log of a table (or partition, by its id) and delete its directory
        (with a table's: its partitions')."""
        with self._lock:
            dropped = [key for key in self._tablets if key[0] == table_id]
            tablets = [self._tablets.pop(key) for key in dropped]
        for tablet in tablets:
            tablet.close(durable_checkpoint=False)
        for directory in [self.root / str(table_id), *self.root.glob(f"*/{self.partition_dir(table_id)}")]:
            self._acknowledged.forget(directory)
            try:
                shutil.rmtree(directory)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise StorageError(f"cannot delete the logs of table {table_id}: {exc}") from exc

    def close_all(self) -> None:
        with self._lock:
            tablets = list(self._tablets.values())
            self._tablets.clear()
        for tablet in tablets:
            tablet.close(durable_checkpoint=False)
        self._flush_acknowledged()

    def tick(self) -> None:
        """Roll every active segment that has grown too old, forget idle writers and checkpoint
        every log's acknowledged offset; the server calls this from a timer. One bucket failing
        does not stop the others."""
        with self._lock:
            tablets = list(self._tablets.values())
        for tablet in tablets:
            try:
                tablet.maybe_roll_by_age()
                tablet.expire_writers()
                tablet.checkpoint_acknowledged(durable=False)
            except LakelogError:
                logger.exception("log maintenance of %s failed", tablet.name)
        self._flush_acknowledged()

    def _flush_acknowledged(self) -> None:
        """Write the logs' acknowledged offsets; when that fails they stay as last written, which
        is safe: the checkpoint may lag what was acknowledged, it must never lead."""
        try:
            self._acknowledged.flush()
        except LakelogError:
            logger.exception("checkpointing the acknowledged offsets in %s failed", self._acknowledged.path)
