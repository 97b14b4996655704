"""Recovery of one bucket's log directory as it opens (Fluss's ``LogLoader``): which segments are
kept, where the log starts, and what is set aside.

Every segment is opened; the rolled ones are checked cheaply and the active one fully (unless the
last shutdown was clean). Only the active segment's torn tail is ever cut: a damaged rolled segment
is quarantined, its offsets served from remote storage if uploaded, else failing by name. The
writers' state is rebuilt on the way: their snapshot as of the first segment, then the batch
headers; and what survives is flushed, so the high watermark may cover all of it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from lakelog.errors import CorruptRecordError
from lakelog.server.log.durable_files import fsync_directory
from lakelog.server.log.quarantine import QuarantinedRange, find_holes
from lakelog.server.log.segment import LogSegment
from lakelog.server.log.writer_snapshot import restore_writer_snapshot
from lakelog.server.log.writer_state import WriterState

logger = logging.getLogger(__name__)

# Written by a clean close: the active segment needs only the cheap check.
CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
# The log start offset, checkpointed as segments before it are deleted.
LOG_START_OFFSET_FILE = "log-start-offset"


@dataclass(frozen=True)
class LoadedLog:
    """A recovered log: its segments, oldest first (the last one active), where it starts, and
    the offset ranges of damaged rolled segments set aside, oldest first."""

    segments: tuple[LogSegment, ...]
    log_start_offset: int
    quarantined: tuple[QuarantinedRange, ...]


class LogLoader:
    def __init__(self, directory: Path, index_interval_bytes: int, name: str, writers: WriterState) -> None:
        """``writers`` is rebuilt from every kept batch header; ``name`` names the bucket in logs."""
        self.directory = directory
        self.index_interval_bytes = index_interval_bytes
        self.name = name
        self._writers = writers

    def load(self) -> LoadedLog:
        marker = self.directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        bases = sorted(int(path.stem) for path in self.directory.glob("*.log") if path.stem.isdigit())
        for index_path in [*self.directory.glob("*.index"), *self.directory.glob("*.timeindex")]:
            if index_path.stem.isdigit() and int(index_path.stem) not in bases:
                index_path.unlink()
        checkpoint = self.directory / LOG_START_OFFSET_FILE
        start = int(checkpoint.read_text()) if checkpoint.exists() else 0
        segments = [LogSegment(self.directory, base, self.index_interval_bytes) for base in bases]
        # A crash inside delete_segments_before can leave segments the checkpoint already dropped.
        while len(segments) > 1 and segments[1].base_offset <= start:
            segments.pop(0).delete()
        restore_writer_snapshot(self.directory, segments[0].base_offset if segments else start, self._writers, self.name)
        segments = [segment for segment in segments[:-1] if self._rolled_segment_intact(segment)] + segments[-1:]
        truncated = 0
        if segments:
            truncated = segments[-1].sanity_check() if clean else segments[-1].recover()
        else:
            segments.append(LogSegment(self.directory, start, self.index_interval_bytes))
        self._writers.replay(header for _, header in segments[-1].iter_batches())
        # What survived the restart is durable from now on: the HW may cover all of it.
        segments[-1].flush()
        marker.unlink(missing_ok=True)
        fsync_directory(self.directory)
        holes = find_holes(self.directory, segments, start)
        start = max(start, min([segments[0].base_offset, *(hole.start for hole in holes)]))
        if truncated:
            outcome = f"truncated {truncated} bytes of a torn batch"
        else:
            outcome = "after a clean shutdown" if clean else "nothing to truncate"
        logger.info(
            "recovered %s: %d segments, offsets [%d, %d), %s",
            self.name, len(segments), start, segments[-1].next_offset, outcome,
        )
        return LoadedLog(tuple(segments), start, holes)

    def _rolled_segment_intact(self, segment: LogSegment) -> bool:
        """Check a rolled segment without cutting it, and replay its batch headers into the
        writers' state (which reads every header, so damage the cheap check of its ends missed is
        found here); a damaged one is quarantined (False)."""
        try:
            segment.sanity_check(truncate=False)
            self._writers.replay(header for _, header in segment.iter_batches())
            return True
        except CorruptRecordError as exc:
            logger.error(
                "%s: rolled segment damaged (%s); quarantined as %s, never cut: its offsets are served from "
                "remote storage if uploaded, else fail by name",
                self.name, exc.message, segment.quarantine(),
            )
            return False
