"""A consumer group over a table's whole history (docs/contract.md, "Consumer groups"): a reset by
timestamp into the part of the history only the lake holds, and a committed offset only the lake
holds, which the group's member then reads from the lake, on into the remote and local tiers.

Real parts: a server on loopback with remote storage, the tiering job in-process on the shared
SparkSession, an Iceberg lake in a local SQLite catalog and warehouse read with pyarrow.
"""

from __future__ import annotations

import bisect
import time
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

import lakelog
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.conftest import TIERED_TABLE, create_table, expire_remote, log_rows, order_rows, wait_until

BUCKETS = 2
ROWS = 500  # per batch


def produce(table: lakelog.Table, first_batch: int, batches: int) -> None:
    """One batch per bucket at a time, a few ms apart: timestamps that tell batches apart."""
    with table.new_append().create_writer() as writer:
        for index in range(first_batch, first_batch + batches):
            for bucket in range(BUCKETS):
                writer.append_arrow(order_rows((index * BUCKETS + bucket) * ROWS, ROWS), bucket=bucket)
            writer.flush()
            time.sleep(0.002)


def test_a_group_reset_by_timestamp_reads_from_the_lake_where_only_the_lake_holds_it(spark: Any, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = ServerProcess(
        {
            "data.dir": str(data_dir),
            "server.port": 0,
            "log.segment.max-bytes": "64kb",
            "remote.log.task-interval": "1h",
            "remote.data.dir": (data_dir / "remote").as_uri(),
        }
    ).start()
    try:
        assert server.tablet is not None
        remote = server.tablet.remote
        with lakelog.connect(server.address, {"client.lake.enabled": "false"}) as conn:
            table = create_table(conn, buckets=BUCKETS, properties=TIERED_TABLE)
            produce(table, 0, 20)
            remote.run_once()
            with TieringJob(TieringOptions(server.address, tables=(table.path,)), spark=spark) as job:
                job.run_round()
            produce(table, 20, 10)
            remote.run_once()
            truth = log_rows(server.address, table.path)
            assert expire_remote(remote, days=2).expired > 0
            described = conn.admin.describe_buckets(table.path)
        for info in described.values():
            assert 0 < info.remote_log_start_offset <= info.lake_log_end_offset, "the oldest offsets are the lake's alone"

        # A time inside the lake-only part: the commit timestamp of bucket 0's fifth batch.
        bucket0 = truth.filter(pc.equal(truth.column("__bucket"), 0))
        ms = bucket0.column("__timestamp")[4 * ROWS].as_py()
        expected = {}
        for bucket in range(BUCKETS):
            mine = truth.filter(pc.equal(truth.column("__bucket"), bucket))
            expected[bucket] = mine.column("__offset")[bisect.bisect_left(mine.column("__timestamp").to_pylist(), ms)].as_py()
            assert expected[bucket] < described[bucket].remote_log_start_offset

        config = {"client.lake.source": "iceberg-arrow", "client.scanner.group.session-timeout": "2s"}
        with lakelog.connect(server.address, config) as conn:
            assert conn.admin.reset_group_offsets("history", table.path, spec=lakelog.OffsetSpec.timestamp(ms)) == expected
            assert conn.admin.list_group_offsets("history", table.path) == expected
            ends = conn.admin.list_offsets(table.path, spec=lakelog.OffsetSpec.latest())
            with conn.get_table(table.path).new_scan().create_log_scanner(group="history") as scanner:
                offsets: dict[int, list[int]] = {b: [] for b in range(BUCKETS)}

                def read() -> bool:
                    for record in scanner.poll(timeout_ms=200):
                        offsets[record.bucket].append(record.offset)
                    return all(len(offsets[b]) >= ends[b] - expected[b] for b in range(BUCKETS))

                wait_until(read, "the group read from its reset offsets to the end", 120)
                for bucket in range(BUCKETS):
                    assert offsets[bucket] == list(range(expected[bucket], ends[bucket])), f"bucket {bucket}: in order, no gap, no duplicate"
                assert scanner.records_by_tier().get("lake", 0) > 0
            assert conn.admin.list_group_offsets("history", table.path) == ends, "closing committed the ends"
    finally:
        server.stop(0)
