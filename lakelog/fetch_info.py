"""Where a fetch's records are when the tablet server does not send them itself: in remote
segments (the client reads their files) or only in the lake (the client asks its LogSource). What a
fetch answer carries, and the one place the remote layout names segment files."""

from __future__ import annotations

from dataclasses import dataclass


def remote_segment_file(segment_id: str, start_offset: int, suffix: str) -> str:
    """A remote segment's file under its bucket's remote directory: ``<segment_id>/<start:020d><suffix>``
    (suffix ``.log``, ``.index`` or ``.timeindex``). The one place the remote layout names files."""
    return f"{segment_id}/{start_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class RemoteLogSegment:
    """One uploaded segment: offsets ``[start_offset, end_offset)``, stored under ``segment_id``."""

    segment_id: str
    start_offset: int
    end_offset: int
    max_timestamp: int
    size_in_bytes: int

    def file(self, suffix: str) -> str:
        return remote_segment_file(self.segment_id, self.start_offset, suffix)


@dataclass(frozen=True, slots=True)
class RemoteLogFetchInfo:
    """A fetch below the local log start: where the client reads the records itself. ``segments``
    start with the one holding the fetch offset; ``first_start_pos`` is the byte position, in that
    segment's ``.log``, of the batch holding the fetch offset."""

    remote_log_tablet_dir: str
    segments: tuple[RemoteLogSegment, ...]
    first_start_pos: int
    partition_name: str = ""


@dataclass(frozen=True, slots=True)
class LakeLogFetchInfo:
    """The fetch offset lies only in the lake: read ``[offset, log_end_offset)`` of snapshot ``snapshot_id``."""

    snapshot_id: int
    log_end_offset: int
