"""The asyncio writer: the sync writer's core, whose waits are awaited.

Appends hand batches to the writer's accumulator at once (the writer is made non-blocking) after
awaiting room, ``flush()`` awaits until every batch is acknowledged: the accumulator signals the
event loop whenever an answer lands (:class:`~lakelog.client.aio.loop_signal.LoopSignal`). Rows of
a partition the writer has not met yet are looked up, or the partition created, on the
connection's control thread first; everything else runs on the loop, delivery reports included.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Mapping

from lakelog.client.aio.loop_signal import LoopSignal
from lakelog.client.arrow_input import arrow_table
from lakelog.client.delivery import DeliveryStats
from lakelog.client.partition_writer import PartitionedAppendWriter
from lakelog.client.writer import AppendWriter

Control = Callable[..., Awaitable[Any]]


class AsyncWriter:
    def __init__(self, writer: AppendWriter | PartitionedAppendWriter, control: Control) -> None:
        """``writer``: made with ``blocking=False``; ``control(call, *args)``: runs a call that asks
        the coordinator without blocking the loop."""
        self._writer = writer
        self._partitioned = writer if isinstance(writer, PartitionedAppendWriter) else None
        self._core = writer.writer if isinstance(writer, PartitionedAppendWriter) else writer
        self._control = control
        self._signal: LoopSignal | None = None

    async def append(self, row: Mapping[str, Any], bucket: int | None = None) -> None:
        if self._partitioned is not None:
            await self._know([self._partitioned.row_partition(row)])
        await self._until(self._core.has_room)
        self._writer.append(row, bucket)

    async def append_arrow(self, data: Any, bucket: int | None = None) -> None:
        if self._partitioned is not None:
            info = self._partitioned.info
            data = arrow_table(data, info.schema, str(info.path))
            await self._know(self._partitioned.unknown_partitions(data))
        await self._until(self._core.has_room)
        self._writer.append_arrow(data, bucket)

    async def flush(self) -> None:
        """Send everything appended and await its acknowledgement; raise as the sync flush does."""
        if self._partitioned is not None:
            self._partitioned.send_all()
        self._core.send_all()
        await self._until(self._core.flushed)
        self._core.end_flush()

    async def close(self) -> None:
        try:
            await self.flush()
        finally:
            self._writer.close()  # nothing left to wait for: flushed, or failed
            if self._signal is not None:
                self._signal.close()

    @property
    def delivery_stats(self) -> DeliveryStats:
        return self._core.delivery_stats

    async def __aenter__(self) -> "AsyncWriter":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _know(self, names: list[str]) -> None:
        assert self._partitioned is not None
        for name in names:
            await self._control(self._partitioned.partition_info, name)

    async def _until(self, ready: Callable[[], bool]) -> None:
        """Await until ``ready()`` holds (under the writer's lock), woken by the accumulator."""
        signal = self._listening()
        accumulator = self._core.accumulator
        while True:
            signal.clear()
            with accumulator.cond:
                if ready():
                    return
            await signal.wait(None)

    def _listening(self) -> LoopSignal:
        if self._signal is None:
            accumulator = self._core.accumulator
            self._signal = LoopSignal(asyncio.get_running_loop(), accumulator.listeners, accumulator.cond)
        return self._signal
