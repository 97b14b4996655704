"""One table with records in all three tiers: the oldest only in the lake, the next in remote
segments, the newest on local disk; the whole log read before the remote expiry is the truth
readers are compared with."""

from __future__ import annotations

import bisect
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

import lakelog
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.harness.lake_tier import expire_remote
from tests.harness.tables import create_table, log_rows, order_rows

BUCKETS = 2
ROWS_PER_BATCH = 1000
# Batches per bucket: tiered in round 1, tiered in round 2, never tiered.
ROUNDS = (30, 10, 10)
PROJECTION = ["amount", "id"]


@dataclass
class TieredLog:
    server: ServerProcess
    path: lakelog.TablePath
    truth: pa.Table  # every record, by bucket and offset
    buckets: dict[int, lakelog.BucketInfo]
    outage: Callable[[], Any]  # a context manager: the warehouse is unreachable inside it

    def rows(self, bucket: int, start: int = 0, end: int | None = None) -> pa.Table:
        mine = self.truth.filter(pc.equal(self.truth.column("__bucket"), bucket))
        return mine.slice(start, (mine.num_rows if end is None else end) - start)

    def timestamps(self, bucket: int) -> list[int]:
        return self.rows(bucket).column("__timestamp").to_pylist()

    def offset_for(self, bucket: int, ms: int) -> int:
        """What the full log answers: the first offset with a timestamp >= ms, else the latest."""
        return bisect.bisect_left(self.timestamps(bucket), ms)

    def lake_only_end(self, bucket: int) -> int:
        """Offsets below this exist only in the lake."""
        info = self.buckets[bucket]
        return min(o for o in (info.remote_log_start_offset, info.local_log_start_offset) if o >= 0)


def produce_rounds(table: lakelog.Table, first_batch: int, batches: int) -> None:
    """One batch per bucket per produce round, a few ms apart: distinct timestamps across batches."""
    with table.new_append().create_writer() as writer:
        for index in range(first_batch, first_batch + batches):
            for bucket in range(BUCKETS):
                writer.append_arrow(order_rows((index * BUCKETS + bucket) * ROWS_PER_BATCH, ROWS_PER_BATCH), bucket=bucket)
            writer.flush()
            time.sleep(0.002)


Tier = Callable[[str, lakelog.TablePath], None]


def tier_in_process(spark: Any) -> Tier:
    """One round of the tiering job in this process, on the shared SparkSession."""

    def tier(address: str, path: lakelog.TablePath) -> None:
        with TieringJob(TieringOptions(address, tables=(path,)), spark=spark) as job:
            job.run_round()

    return tier


def build_tiered_log(data_dir: Path, tier: Tier, lake_conf: dict[str, str], outage: Callable[[], Any]) -> TieredLog:
    conf = {
        "data.dir": str(data_dir),
        "server.port": 0,
        "log.segment.max-bytes": "64kb",
        "remote.log.task-interval": "1h",
        "remote.data.dir": (data_dir / "remote").as_uri(),
        **lake_conf,
    }
    server = ServerProcess(conf).start()
    assert server.tablet is not None
    remote = server.tablet.remote
    # Nothing expires on the wall clock; expire_remote moves the remote task's clock ahead for one pass instead.
    properties = {"table.datalake.enabled": "true", "table.log.ttl": "1h", "table.log.tiered.local-segments": "1"}
    with lakelog.connect(server.address, {"client.lake.enabled": "false"}) as conn:
        table = create_table(conn, buckets=BUCKETS, properties=properties)
        first = 0
        for rounds, batches in enumerate(ROUNDS):
            produce_rounds(table, first, batches)
            first += batches
            remote.run_once()
            if rounds < 2:
                tier(server.address, table.path)
                lake_ends = {info.lake_log_end_offset for info in conn.admin.describe_buckets(table.path).values()}
                assert lake_ends == {first * ROWS_PER_BATCH}, "a round tiers everything produced"
        truth = log_rows(server.address, table.path)
        assert expire_remote(remote, days=2).expired > 0
        buckets = conn.admin.describe_buckets(table.path)
    tiered = ROUNDS[0] + ROUNDS[1]
    for info in buckets.values():
        assert (info.lake_log_start_offset, info.lake_log_end_offset) == (0, tiered * ROWS_PER_BATCH)
        assert 0 < info.remote_log_start_offset <= info.lake_log_end_offset < info.remote_log_end_offset
        assert info.remote_log_start_offset < info.local_log_start_offset < info.high_watermark
    return TieredLog(server, table.path, truth, buckets, outage)


def assert_rows(got: pa.Table, want: pa.Table, columns: list[str]) -> None:
    for name in ["__bucket", "__offset", "__timestamp", *columns]:
        assert got.column(name).equals(want.column(name)), name


def local_tiered_log(data_dir: Path, spark: Any) -> TieredLog:
    """The tiered log with its lake in ``data_dir``'s warehouse, tiered on ``spark``; its outage
    moves the warehouse away for a moment."""
    warehouse = data_dir / "lake" / "warehouse"

    @contextmanager
    def outage() -> Iterator[None]:
        warehouse.rename(warehouse.with_name("warehouse-away"))
        try:
            yield
        finally:
            warehouse.with_name("warehouse-away").rename(warehouse)

    return build_tiered_log(data_dir, tier_in_process(spark), {}, outage)
