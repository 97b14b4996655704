"""The asyncio scanner: the sync scanner's fetcher, buffer and collector, whose waits are awaited.

A poll looks at the buffer (sending the fetches due and taking what is there, under the poll's
caps) and, when nothing is there, awaits the buffer's next arrival or its deadline: every answer
and every remote or lake batch signals the event loop
(:class:`~lakelog.client.aio.loop_signal.LoopSignal`). Subscriptions and partition discovery ask
the coordinator and list offsets: they run on the connection's control thread.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable

import pyarrow as pa

from lakelog.client.aio.loop_signal import LoopSignal
from lakelog.client.scanner.log_scanner import IDLE_WAIT_S, LogScanner
from lakelog.client.scanner.polled_scanner import ITERATION_POLL_MS
from lakelog.client.scanner.scan_records import ScanRecord, ScanRecords

Control = Callable[..., Awaitable[Any]]


class AsyncLogScanner:
    def __init__(self, scanner: LogScanner, control: Control) -> None:
        self._scanner = scanner
        self._control = control
        self._signal: LoopSignal | None = None

    @property
    def schema(self) -> pa.Schema:
        return self._scanner.schema

    # subscriptions: the sync scanner's, on the control thread

    async def subscribe(self, bucket: int, offset: int, partition_id: int | None = None) -> None:
        await self._control(self._scanner.subscribe, bucket, offset, partition_id)

    async def subscribe_partition(self, partition_id: int, bucket: int, offset: int) -> None:
        await self._control(self._scanner.subscribe_partition, partition_id, bucket, offset)

    async def subscribe_from_beginning(self, buckets: Iterable[int] | None = None) -> None:
        await self._control(self._scanner.subscribe_from_beginning, buckets)

    async def subscribe_from_timestamp(self, ms: int, buckets: Iterable[int] | None = None) -> None:
        await self._control(self._scanner.subscribe_from_timestamp, ms, buckets)

    async def unsubscribe(self, bucket: int, partition_id: int | None = None) -> None:
        await self._control(self._scanner.unsubscribe, bucket, partition_id)

    def positions(self) -> dict[Any, int]:
        return self._scanner.positions()

    def assignment(self) -> set[Any]:
        return self._scanner.assignment()

    async def commit(self) -> None:
        """A group member's commit (see :meth:`LogScanner.commit`), on the control thread."""
        await self._control(self._scanner.commit)

    def records_by_tier(self) -> dict[str, int]:
        return self._scanner.records_by_tier()

    # polling

    async def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> ScanRecords:
        """As :meth:`LogScanner.poll`, awaiting instead of blocking; a poll cancelled while it
        waits loses nothing (records stay buffered for the next)."""
        scanner = self._scanner
        scanner.check_subscribed()
        limit = scanner.max_poll_records if max_records is None else max_records
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        signal = self._listening()
        while True:
            if scanner.discovery_due():
                await self._control(scanner.discover)
            signal.clear()
            records = scanner.collect(limit)
            if records or time.monotonic() >= deadline:
                return records
            await signal.wait(min(max(deadline - time.monotonic(), 0), IDLE_WAIT_S))

    async def poll_arrow(self, timeout_ms: int = 1000) -> pa.Table:
        return (await self.poll(timeout_ms)).to_arrow()

    async def iterate(self, timeout_ms: int = ITERATION_POLL_MS) -> AsyncIterator[ScanRecord]:
        """Records poll by poll, until a poll of ``timeout_ms`` brings none."""
        while records := await self.poll(timeout_ms):
            for record in records:
                yield record

    def __aiter__(self) -> AsyncIterator[ScanRecord]:
        """``async for record in scanner``: what there is now, ending once a poll of 1 s brings nothing."""
        return self.iterate()

    async def close(self) -> None:
        """A group member commits and leaves the group on the control thread."""
        if self._signal is not None:
            self._signal.close()
        await self._control(self._scanner.close)

    async def __aenter__(self) -> "AsyncLogScanner":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _listening(self) -> LoopSignal:
        if self._signal is None:
            buffer = self._scanner.buffer
            self._signal = LoopSignal(asyncio.get_running_loop(), buffer.listeners, buffer.cond)
        return self._signal
