"""Where a bucket's records live in remote storage, as a FetchLog answer tells the client.

The fetcher converts the protobuf ``PbRemoteLogFetchInfo`` into these at the RPC edge, so the
downloader and the reader never see protobuf.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RemoteLogSegment:
    """One uploaded segment: offsets ``[start_offset, end_offset)``."""

    segment_id: str
    start_offset: int
    end_offset: int
    size_in_bytes: int
    max_timestamp: int

    @property
    def log_file(self) -> str:
        """Path of the segment's ``.log`` relative to the tablet's remote directory."""
        return f"{self.segment_id}/{self.start_offset:020d}.log"


@dataclass(frozen=True, slots=True)
class RemoteLogFetchInfo:
    """Segments to read, the first one holding the fetch offset; ``first_start_pos`` is the byte in
    the first segment's ``.log`` where the batch holding the fetch offset starts."""

    tablet_dir: str
    segments: tuple[RemoteLogSegment, ...]
    first_start_pos: int
    partition_name: str = ""
