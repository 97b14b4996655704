"""Local log storage: segments, indexes, recovery and flushing of one bucket's log."""

from lakelog.server.log.log_manager import LogManager
from lakelog.server.log.log_tablet import AppendResult, LogConfig, LogTablet, ReadResult
from lakelog.server.log.segment import LogSegment

__all__ = ["AppendResult", "LogConfig", "LogManager", "LogSegment", "LogTablet", "ReadResult"]
