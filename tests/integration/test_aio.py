"""``lakelog.aio`` on a real server: admin calls, appends, flush and polls are awaited; the event
loop runs on while a poll or a flush waits; a cancelled poll loses nothing; awaited calls add no
threads; a partitioned table is written and read as by the sync client."""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any, Awaitable, Callable

import pyarrow as pa

import lakelog
import lakelog.aio
from lakelog.server.server_process import ServerProcess
from tests.harness.tables import ORDERS_SCHEMA, order_rows

PATH = lakelog.TablePath("shop", "orders")
EVENTS = pa.schema([("dt", pa.string()), ("id", pa.int64())])


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


async def _table(conn: lakelog.aio.AsyncConnection, buckets: int = 2) -> lakelog.aio.AsyncTable:
    await conn.admin.create_database("shop", ignore_if_exists=True)
    await conn.admin.create_table(PATH, lakelog.TableDescriptor(ORDERS_SCHEMA, buckets))
    return await conn.get_table(PATH)


async def _ticking(during: Awaitable[Any]) -> tuple[Any, int]:
    """``during``'s result, and how often another coroutine ran on the loop meanwhile."""
    ticks = 0
    done = False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    try:
        return await during, ticks
    finally:
        done = True
        await task


def test_append_flush_and_poll_are_awaited_and_reports_run_on_the_loop(server: ServerProcess) -> None:
    async def test() -> None:
        async with await lakelog.aio.connect(server.address) as conn:
            table = await _table(conn)
            acks: list[lakelog.AppendAck] = []
            loop_thread = threading.current_thread()
            on_loop: list[bool] = []

            def on_ack(ack: lakelog.AppendAck) -> None:
                acks.append(ack)
                on_loop.append(threading.current_thread() is loop_thread)

            writer = table.new_append().create_writer(on_ack=on_ack)
            await writer.append({"id": -1, "name": "first", "amount": 0.5}, bucket=0)
            await writer.append_arrow(order_rows(0, 100), bucket=1)
            await writer.flush()
            assert sum(ack.record_count for ack in acks) == 101 and all(on_loop)
            await writer.close()
            assert await conn.admin.list_offsets(PATH) == {0: 1, 1: 100}

            scanner = table.new_scan().project(["id"]).create_log_scanner()
            await scanner.subscribe_from_beginning()
            got = [record.row["id"] async for record in scanner]
            assert sorted(got) == [-1, *range(100)]
            assert scanner.positions() == {0: 1, 1: 100}
            await scanner.close()

    run(test)


def test_the_loop_runs_while_a_poll_and_a_flush_wait_and_a_cancelled_poll_loses_nothing(server: ServerProcess) -> None:
    async def test() -> None:
        async with await lakelog.aio.connect(server.address) as conn:
            table = await _table(conn, buckets=1)
            scanner = table.new_scan().create_log_scanner()
            await scanner.subscribe(0, 0)
            records, ticks = await _ticking(scanner.poll(timeout_ms=300))
            assert not records and ticks > 3, f"the loop ran {ticks} times while an empty poll waited"

            waiting = asyncio.create_task(scanner.poll(timeout_ms=60_000))
            await asyncio.sleep(0.05)
            waiting.cancel()
            writer = table.new_append().create_writer()
            await writer.append_arrow(order_rows(0, 50))
            _, ticks = await _ticking(writer.flush())
            await writer.close()
            polled = await scanner.poll_arrow(timeout_ms=10_000)
            assert polled.column("id").to_pylist() == list(range(50)), "the records arrive after a cancelled poll"
            await scanner.close()

    run(test)


def test_awaited_calls_add_no_threads(server: ServerProcess) -> None:
    async def test() -> None:
        async with await lakelog.aio.connect(server.address) as conn:
            table = await _table(conn)
            writer = table.new_append().create_writer()
            scanner = table.new_scan().create_log_scanner()
            await scanner.subscribe_from_beginning()
            await writer.append_arrow(order_rows(0, 10), bucket=0)
            await writer.flush()
            await scanner.poll(timeout_ms=5000)
            before = collections.Counter(thread.name for thread in threading.enumerate())
            for start in range(10, 210, 10):
                await writer.append_arrow(order_rows(start, 10), bucket=start // 10 % 2)
                await writer.flush()
                await scanner.poll(timeout_ms=0)
                await conn.admin.list_offsets(PATH)
            after = collections.Counter(thread.name for thread in threading.enumerate())
            assert after == before
            await writer.close()
            await scanner.close()

    run(test)


def test_a_partitioned_table_is_written_and_read_through_the_same_core(server: ServerProcess) -> None:
    async def test() -> None:
        async with await lakelog.aio.connect(server.address) as conn:
            path = lakelog.TablePath("shop", "events")
            await conn.admin.create_database("shop", ignore_if_exists=True)
            await conn.admin.create_table(path, lakelog.TableDescriptor(EVENTS, 2, partition_keys=["dt"]))
            table = await conn.get_table(path)
            writer = table.new_append().create_writer()
            await writer.append({"dt": "d1", "id": 0})
            await writer.append_arrow(pa.table({"dt": ["d2", "d3", "d1"], "id": [1, 2, 3]}, schema=EVENTS))
            await writer.close()
            scanner = table.new_scan().create_log_scanner()
            await scanner.subscribe_from_beginning()
            got = sorted([(record.row["dt"], record.row["id"]) async for record in scanner])
            await scanner.close()
            assert got == [("d1", 0), ("d1", 3), ("d2", 1), ("d3", 2)]
            names = {p.partition_name for p in await conn.admin.list_partition_infos(path)}
            assert names == {"d1", "d2", "d3"}

    run(test)
