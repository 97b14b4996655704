"""Replicated buckets on a cluster of a coordinator and three tablet server processes.

- Produce with ``acks=all`` into tables of replication factor 3, against the same records into
  tables of factor 1 on the same cluster: what keeping three copies in sync costs a writer.
- The first ``acks=all`` produce to each new partition (created by that produce) of a factor-3
  table, against factor 1: what starting to copy a bucket costs its first writer (the followers'
  fetches waiting at the leader must take the new buckets in).
- Failover: the leader of a factor-3 bucket is killed with SIGKILL; timed from the kill to the
  first produce acknowledged after it and to that record read back, over many kills (the killed
  server restarts and rejoins the in-sync set before the next one). The coordinator notices the
  dead server after ``coordinator.tablet-server.heartbeat-timeout``, so that setting governs it.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from contextlib import ExitStack

import lakelog
import pyarrow as pa

from bench import data
from bench.cluster import DATABASE, BenchCluster
from bench.measure import Result, Trial, cpu_seconds, medians_in_turns, percentile, progress
from bench.partitions import DAY_COLUMN, SCHEMA as PARTITIONED_SCHEMA
from bench.server_host import HostedServer
from bench.sizes import Sizes

TABLET_SERVERS = 3
FACTORS = (1, 3)
FAILOVER_TARGET_S = 10.0
NEW_PARTITIONS = 20


def write(table: lakelog.Table, batches: list) -> None:
    with table.new_append().create_writer() as writer:  # close() flushes: every record acknowledged
        for batch in batches:
            writer.append_arrow(batch)


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    servers = cluster.start_cluster("replication", TABLET_SERVERS)
    try:
        with cluster.connect(server=servers[0]) as conn:
            return [_produce(cluster, conn, servers, sizes), _new_partitions(conn), *_failover(cluster, conn, servers, sizes)]
    finally:
        for server in reversed(servers):
            server.stop()


def _produce(cluster: BenchCluster, conn: lakelog.Connection, servers: list[HostedServer], sizes: Sizes) -> Result:
    """Also what each factor costs in CPU per run, the tablet servers' together and the writer's:
    on this machine all three servers and the writer share its cores."""
    records = sizes.produce_records
    batches = data.chunks(records)
    names = itertools.count()
    cpu: dict[int, list[float]] = {factor: [0.0, 0.0] for factor in FACTORS}  # tablet servers, writer
    tablet_servers = [server.pid for server in servers[1:]]
    current: dict[int, lakelog.Table] = {}

    def new_table(factor: int) -> None:
        if factor in current:
            conn.admin.drop_table(current.pop(factor).path)
        current[factor] = cluster.table(f"replicated_{factor}_{next(names)}", {"table.replication.factor": str(factor)}, conn=conn)

    def write_counted(factor: int) -> None:
        """One run, its CPU added to the factor's: the servers' (every thread) and this process's."""
        before = sum(map(cpu_seconds, tablet_servers)), time.process_time()
        write(current[factor], batches)
        after = sum(map(cpu_seconds, tablet_servers)), time.process_time()
        cpu[factor][0] += (after[0] - before[0]) / sizes.runs
        cpu[factor][1] += (after[1] - before[1]) / sizes.runs

    progress(f"replication: produce {records:,} records, acks=all, replication factor 1 and 3 in turns")
    trials = [Trial(lambda f=f: write_counted(f), before=lambda f=f: new_table(f)) for f in FACTORS]
    seconds = dict(zip(FACTORS, medians_in_turns(sizes.runs, *trials)))
    for factor in FACTORS:
        conn.admin.drop_table(current.pop(factor).path)
    return Result(
        "R1", "Produce: acks=all, replication factor 3", records / seconds[3], "records/s", records / seconds[1],
        "replication factor 1 on the same 3-server cluster", seconds[1] / seconds[3], 0.5,
        detail=f"{records:,} records in batches of {data.CHUNK_RECORDS:,}, 4 buckets; CPU per run (its mean while it ran), tablet servers + writer: "
        f"factor 1 {cpu[1][0]:.2f} + {cpu[1][1]:.2f} s, factor 3 {cpu[3][0]:.2f} + {cpu[3][1]:.2f} s",
        tier="produce (factor 3)",
        next_step="followers fetch over the replica stream, outside gRPC (0.32-0.41x when they fetch over gRPC, "
        "server.replica-stream.port=-1, 0.39-0.59x over the stream, 11 runs of this row alone): what is left is the machine and the interpreter. Factor 3 "
        "appends every record three times (each copy received, checked and written into the page cache), and the "
        "page-cache copy runs at 0.4-1.6 GB/s here against 4 GB/s right after pages were freed: this VM's balloon "
        "reports free pages to the host, so a page handed out again faults there (1 GB into new page cache with dd: "
        "2.1-2.3 s after its pages were free for 8 s, 0.19-0.26 s right after). The three servers and the writer share "
        "2 cores, and each server's threads (its followers' fetchers, its stream's answers, its produce handlers) "
        "one interpreter lock: in py-spy a fetcher waits for the lock after each poll, write and CRC check. On servers "
        "of their own each follower's work runs on its own machine"
    )


def _new_partitions(conn: lakelog.Connection) -> Result:
    """Each factor's writer creates a partition per produce (two records, flushed), the factors in
    turns; the time of each append and flush, partition creation included for both."""
    seconds: dict[int, list[float]] = {factor: [] for factor in FACTORS}
    progress(f"replication: first acks=all produce to each of {NEW_PARTITIONS} new partitions, replication factor 1 and 3 in turns")
    with ExitStack() as stack:
        writers = {}
        for factor in FACTORS:
            path = lakelog.TablePath(DATABASE, f"new_partitions_{factor}")
            descriptor = lakelog.TableDescriptor(PARTITIONED_SCHEMA, 2, {"table.replication.factor": str(factor)}, partition_keys=[DAY_COLUMN])
            conn.admin.create_table(path, descriptor)
            stack.callback(conn.admin.drop_table, path)
            writers[factor] = stack.enter_context(conn.get_table(path).new_append().create_writer())
        for n in range(NEW_PARTITIONS):
            rows = data.rows(2 * n, 2)
            batch = pa.RecordBatch.from_arrays([*rows.columns, pa.array([f"d{n:02d}"] * rows.num_rows)], schema=PARTITIONED_SCHEMA)
            for factor in FACTORS if n % 2 else FACTORS[::-1]:
                started = time.perf_counter()
                writers[factor].append_arrow(batch)
                writers[factor].flush()
                seconds[factor].append(time.perf_counter() - started)
    p50, p99 = ({factor: percentile(seconds[factor], q) * 1000 for factor in FACTORS} for q in (50, 99))
    return Result(
        "R3", "Produce: first acks=all produce to a new partition, factor 3, p50", p50[3], "ms", p50[1],
        "replication factor 1 on the same cluster, in turns", p50[1] / p50[3], None,
        detail=f"{NEW_PARTITIONS} partitions per factor, each created by its produce of 2 records (2 buckets); "
        f"p99 factor 3 {p99[3]:.1f} ms, factor 1 {p99[1]:.1f} ms",
    )


def _failover(cluster: BenchCluster, conn: lakelog.Connection, servers: list[HostedServer], sizes: Sizes) -> list[Result]:
    table = cluster.table("failover", {"table.replication.factor": str(TABLET_SERVERS)}, conn=conn, buckets=1)
    acked: list[float] = []
    read: list[float] = []
    with table.new_append().create_writer() as writer, table.new_scan().create_log_scanner() as scanner:
        scanner.subscribe_from_beginning()
        next_id = 0
        for kill in range(sizes.failover_kills):
            _wait_all_in_sync(conn, table)
            writer.append_arrow(data.rows(next_id, 1))
            writer.flush()
            _read_up_to(scanner, next_id)
            victim = conn.admin.describe_buckets(table.path)[0].leader
            os.kill(servers[victim].pid, signal.SIGKILL)
            killed = time.monotonic()
            next_id += 1
            writer.append_arrow(data.rows(next_id, 1))
            writer.flush()
            acked.append(time.monotonic() - killed)
            _read_up_to(scanner, next_id)
            read.append(time.monotonic() - killed)
            progress(f"replication: kill {kill + 1}: acknowledged after {acked[-1]:.2f} s, read after {read[-1]:.2f} s")
            servers[victim].stop()
            servers[victim] = HostedServer(servers[victim].config, ("tablet-server",))
            next_id += 1
    detail = f"{len(acked)} kills of the leader of a factor-3 bucket, defaults (heartbeat timeout 6 s)"
    return [
        Result(
            f"R2{suffix}", f"Failover: kill -9 of the leader to the first {what}, {name}", percentile(samples, q), "s", None,
            "", percentile(samples, q), FAILOVER_TARGET_S if q == 99 else None, lower_is_better=True, detail=detail,
            next_step="a dead leader is noticed when its heartbeats stop for coordinator.tablet-server.heartbeat-timeout "
            "(6 s): a shorter timeout fails over sooner and risks electing around a server that was only slow",
        )
        for suffix, what, samples in (("a", "acknowledged produce", acked), ("b", "record read", read))
        for name, q in (("p50", 50), ("p99", 99))
    ]


def _wait_all_in_sync(conn: lakelog.Connection, table: lakelog.Table) -> None:
    deadline = time.monotonic() + 120
    while len(conn.admin.describe_buckets(table.path)[0].isr) < TABLET_SERVERS:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{table.path} bucket 0 never had all {TABLET_SERVERS} replicas in sync again")
        time.sleep(0.1)


def _read_up_to(scanner: lakelog.LogScanner, last_id: int) -> None:
    while True:
        polled = scanner.poll_arrow(timeout_ms=1000)
        if polled.num_rows and last_id in polled.column("i0").to_pylist():  # i0 is the id
            return
