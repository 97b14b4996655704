"""``lakelog.aio``: the asyncio client (see :mod:`lakelog.client.aio.connection`)."""

from lakelog.client.aio.connection import AsyncAdmin, AsyncConnection, AsyncTable, connect
from lakelog.client.aio.scanner import AsyncLogScanner
from lakelog.client.aio.writer import AsyncWriter

__all__ = ["AsyncAdmin", "AsyncConnection", "AsyncLogScanner", "AsyncTable", "AsyncWriter", "connect"]
