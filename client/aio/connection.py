"""``await lakelog.aio.connect(...)``: a connection whose calls are coroutines, on the sync client's core.

The data path is the core's own: writers hand batches to the connection's sender and await their
acknowledgements, scanners await what the fetcher buffers (:mod:`lakelog.client.aio.loop_signal`).
Control calls (admin, table and partition lookups, subscriptions, which ask the coordinator or list
offsets) wait for the coordinator: they run one at a time on the connection's one control thread,
so the event loop never blocks on them and no call gets a thread of its own.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable, Mapping, Sequence, TypeVar

from lakelog.metadata import TablePath
from lakelog.client.admin import Admin
from lakelog.client.aio.scanner import AsyncLogScanner
from lakelog.client.aio.writer import AsyncWriter
from lakelog.client.connection import Connection
from lakelog.client.record_accumulator import AppendAck
from lakelog.client.table import Table, TableScan

T = TypeVar("T")


class ControlThread:
    """The connection's one thread for calls that wait for the coordinator."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lakelog-aio-control")

    def run(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> Awaitable[T]:
        return asyncio.get_running_loop().run_in_executor(self._executor, functools.partial(call, *args, **kwargs))

    def close(self) -> None:
        self._executor.shutdown(wait=True)


class AsyncAdmin:
    """:class:`~lakelog.client.admin.Admin`'s calls, each a coroutine (same names, same arguments)."""

    def __init__(self, admin: Admin, control: ControlThread) -> None:
        self._admin = admin
        self._control = control

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        call = getattr(self._admin, name)
        if name.startswith("_") or not callable(call):
            raise AttributeError(f"the asyncio admin has no call {name!r}")

        @functools.wraps(call)
        async def awaited(*args: Any, **kwargs: Any) -> Any:
            return await self._control.run(call, *args, **kwargs)

        return awaited


class AsyncConnection:
    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._control = ControlThread()
        self.admin = AsyncAdmin(conn.admin, self._control)
        self.config = conn.config

    async def get_table(self, path: TablePath) -> "AsyncTable":
        return AsyncTable(await self._control.run(self._conn.get_table, path), self._control)

    async def close(self) -> None:
        """Close the connection (writers left open fail what they hold), then the control thread."""
        try:
            await self._control.run(self._conn.close)
        finally:
            self._control.close()

    async def __aenter__(self) -> "AsyncConnection":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def connect(bootstrap: str | Sequence[str] | None = None, config: Mapping[str, Any] | None = None) -> AsyncConnection:
    """A connection to a lakelog cluster (see :class:`~lakelog.client.connection.Connection`);
    nothing is sent until it is used."""
    return AsyncConnection(Connection(bootstrap, config))


class AsyncTable:
    def __init__(self, table: Table, control: ControlThread) -> None:
        self._table = table
        self._control = control
        self.info = table.info

    @property
    def path(self) -> TablePath:
        return self._table.path

    @property
    def schema(self) -> Any:
        return self._table.schema

    def new_append(self) -> "AsyncTableAppend":
        return AsyncTableAppend(self._table, self._control)

    def new_scan(self) -> "AsyncTableScan":
        return AsyncTableScan(self._table.new_scan(), self._table, self._control)


class AsyncTableAppend:
    def __init__(self, table: Table, control: ControlThread) -> None:
        self._table = table
        self._control = control

    def create_writer(self, on_ack: Callable[[AppendAck], None] | None = None) -> AsyncWriter:
        """``on_ack`` runs on the event loop, in the writer's ``append*()`` and ``flush()``."""
        return AsyncWriter(self._table.writer(on_ack, None, blocking=False), self._control.run)


class AsyncTableScan:
    def __init__(self, scan: TableScan, table: Table, control: ControlThread) -> None:
        self._scan = scan
        self._table = table
        self._control = control

    def project(self, columns: Sequence[str | int]) -> "AsyncTableScan":
        return AsyncTableScan(self._scan.project(columns), self._table, self._control)

    def create_log_scanner(self, group: str | None = None) -> AsyncLogScanner:
        """With ``group``, the scanner joins that consumer group (its heartbeats run on its own thread)."""
        return AsyncLogScanner(self._table.scanner(self._scan.projection, group), self._control.run)
