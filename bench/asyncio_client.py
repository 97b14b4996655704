"""Benchmarks A1 and A2: the asyncio client (``lakelog.aio``) against the sync client in the same
run, on the same server and the same records: ``poll_arrow`` reading a table to its end, and
``append_arrow`` + ``flush`` writing one. Both clients share one core (fetcher, buffer, collector;
accumulator, sender), so a gap is what awaiting costs over blocking. The runs take turns
(bench.measure.medians_in_turns), so load that drifts during the run falls on both."""

from __future__ import annotations

import asyncio
import itertools

import lakelog
import lakelog.aio
import pyarrow as pa

from bench import data
from bench.cluster import BenchCluster
from bench.measure import Result, Trial, medians_in_turns, profile_if_missed, progress
from bench.scan import DrainCount, drain
from bench.sizes import Sizes

TARGET = 0.9


async def _drain_async(conn: lakelog.aio.AsyncConnection, path: lakelog.TablePath, expected: int) -> int:
    """As :func:`bench.scan.drain` with ``poll_arrow``, awaited."""
    table = await conn.get_table(path)
    async with table.new_scan().create_log_scanner() as scanner:
        await scanner.subscribe_from_beginning()
        count = DrainCount(str(path), expected)
        while not count.done:
            count.add((await scanner.poll_arrow(timeout_ms=1000)).num_rows)
    return count.got


async def _write_async(conn: lakelog.aio.AsyncConnection, path: lakelog.TablePath, batches: list[pa.RecordBatch]) -> None:
    table = await conn.get_table(path)
    async with table.new_append().create_writer() as writer:  # close() flushes: every record acknowledged
        for batch in batches:
            await writer.append_arrow(batch)


def _write_sync(table: lakelog.Table, batches: list[pa.RecordBatch]) -> None:
    with table.new_append().create_writer() as writer:
        for batch in batches:
            writer.append_arrow(batch)


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    records = sizes.local_records
    progress(f"asyncio: producing {records:,} records into a 4-bucket table to read")
    table = cluster.table("asyncio_read")
    cluster.produce(table, records)
    address = cluster.server.address
    config = cluster.client_config()

    loop = asyncio.new_event_loop()
    aconn = loop.run_until_complete(lakelog.aio.connect(address, config))
    try:
        progress("asyncio: poll_arrow, sync and lakelog.aio in turn")
        sync_read_s, async_read_s = medians_in_turns(
            sizes.runs,
            Trial(lambda: drain(table, records)),
            Trial(lambda: loop.run_until_complete(_drain_async(aconn, table.path, records))),
        )
        read = Result(
            "A1", "asyncio: poll_arrow (lakelog.aio)", records / async_read_s, "records/s", records / sync_read_s,
            "the sync client's poll_arrow, same table, runs in turn", sync_read_s / async_read_s, TARGET,
            detail=f"{records:,} records, local tier, 4 buckets",
        )
        profile_if_missed(read, lambda: loop.run_until_complete(_drain_async(aconn, table.path, records)))
        cluster.drop(table)

        produced = sizes.produce_records
        batches = data.chunks(produced)
        names = itertools.count()
        made: list[lakelog.Table] = []
        progress(f"asyncio: append_arrow + flush of {produced:,} records, sync and lakelog.aio in turn")

        def new_table() -> None:
            made.append(cluster.table(f"asyncio_write_{next(names)}"))

        sync_write_s, async_write_s = medians_in_turns(
            sizes.runs,
            Trial(lambda: _write_sync(made[-1], batches), before=new_table),
            Trial(lambda: loop.run_until_complete(_write_async(aconn, made[-1].path, batches)), before=new_table),
        )
        write = Result(
            "A2", "asyncio: append_arrow + flush (lakelog.aio)", produced / async_write_s, "records/s",
            produced / sync_write_s, "the sync client's writer, same batches, runs in turn", sync_write_s / async_write_s,
            TARGET, detail=f"{produced:,} records in batches of {data.CHUNK_RECORDS:,}, log.flush.mode=sync",
        )
        new_table()
        profile_if_missed(write, lambda: loop.run_until_complete(_write_async(aconn, made[-1].path, batches)))
        for written in made:
            cluster.conn.admin.drop_table(written.path)
    finally:
        loop.run_until_complete(aconn.close())
        loop.close()
    return [read, write]
