"""Benchmark "spark": lakelog's Spark paths.

- S1, the first lake read of a new client through a running Spark Connect server: a fresh process
  (its imports untimed) connects, subscribes from offset 0 of a table only the lake holds and waits
  for its first records; that same scanner's whole first scan, to its last record, is given beside it.
  A running server has served clients before: one client process reads first, and its own first
  read (the server's first jobs ever, JVM and Python workers cold) is given beside S1.
- S2, the PySpark ``LogSource`` through that server, warm (same process, new connections), against
  PyIceberg's ``scan().to_arrow()`` of the same rows.
- S3, a tiering round on a standalone Spark cluster of two one-core workers against the same round
  on ``local[2]``; each in a driver process of its own, one untimed round first (executors up), the
  lake a PostgreSQL catalog with its warehouse on S3, which a cluster needs.

Clients and drivers run as processes of their own: a Spark Connect session or a second classic
session cannot share this process with the local[2] session of the other benchmarks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from bench.cluster import LAKE_PROPERTIES, S3_BUCKET, BenchCluster
from bench.lake_tier import pyiceberg_scan
from bench.measure import Result, Trial, medians_in_turns, progress
from bench.server_host import HostedServer
from bench.sizes import Sizes
from lakelog.spark_runtime.connect_server import SparkConnectServer
from tests.harness.postgres import PostgresServer
from tests.harness.spark_standalone import StandaloneCluster, cluster_environment, submit_args

REPOSITORY = Path(__file__).resolve().parent.parent
# The chart labels each bar by its tier; row 5, "lake write (tiering)", is the same round on local[2].
CLUSTER_TIER = "lake write (standalone cluster)"

CONNECT_CLIENT = textwrap.dedent(
    """
    import json, sys, time
    address, table, records, master, s3 = sys.argv[1:]
    import lakelog
    from bench.scan import drain

    path = lakelog.TablePath(*table.split("."))
    config = {"client.lake.source": "iceberg", "lake.spark.master": master, **json.loads(s3)}

    # The new client's first scan, timed to its first records and on to its last: one scanner.
    began = time.perf_counter()
    first_records = None
    with lakelog.connect(address, config) as conn:
        with conn.get_table(path).new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            got = 0
            while got < int(records):
                polled = scanner.poll_arrow(timeout_ms=1000).num_rows
                if polled and first_records is None:
                    first_records = time.perf_counter() - began
                got += polled
                assert time.perf_counter() - began < 600, f"only {got} of {records} records in 600 s"
            first_scan = time.perf_counter() - began
    print(json.dumps({"first_records": first_records, "first_scan": first_scan}), flush=True)
    for _ in sys.stdin:  # one warm scan, on a new connection, per line the benchmark sends
        with lakelog.connect(address, config) as conn:
            drain(conn.get_table(path), int(records))
        print("scanned", flush=True)
    """
)


class ConnectClient:
    """:data:`CONNECT_CLIENT` in a process of its own: its first scan on start, then a warm scan
    whenever :meth:`scan` asks, so the benchmark can run them in turns with its baseline."""

    def __init__(self, *args: str) -> None:
        self._errors = tempfile.TemporaryFile("w+")  # a pipe nobody reads meanwhile could fill and stall it
        self._proc = subprocess.Popen(
            [sys.executable, "-c", CONNECT_CLIENT, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._errors, text=True, cwd=REPOSITORY, env=cluster_environment(),
        )
        self.first: dict[str, Any] = json.loads(self._answer())

    def scan(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write("scan\n")
        self._proc.stdin.flush()
        self._answer()

    def _answer(self) -> str:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            self._proc.wait()
            self._errors.seek(0)
            raise RuntimeError(f"bench driver failed: {self._errors.read()[-2000:]}")
        return line

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(60)

    def __enter__(self) -> "ConnectClient":
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:
            self._proc.kill()
            self._proc.wait()
        self._errors.close()


TIERING_DRIVER = textwrap.dedent(
    """
    import json, statistics, sys, time
    address, table, master, records, runs, s3 = sys.argv[1:]
    import lakelog
    from bench.cluster import BenchCluster
    from lakelog.tiering.tiering_job import TieringJob, TieringOptions

    path = lakelog.TablePath(*table.split("."))
    records = int(records)
    rounds = []
    with lakelog.connect(address, json.loads(s3)) as conn, TieringJob(
        TieringOptions(address, tables=(path,), spark_master=master, client_config=json.loads(s3))
    ) as job:
        for index in range(int(runs) + 1):  # the first round starts the executors: untimed
            BenchCluster.produce(conn.get_table(path), records, index * records)
            began = time.perf_counter()
            tiered = job.run_round().records
            assert tiered == records, f"a round tiered {tiered} records, not {records}"
            if index:
                rounds.append(time.perf_counter() - began)
    print(json.dumps({"round": statistics.median(rounds)}))
    """
)


def _run_script(script: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=1800, cwd=REPOSITORY,
        env={**cluster_environment(), **(env or {})},
    )
    if result.returncode != 0:
        raise RuntimeError(f"bench driver failed: {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    reads = _connect_reads(cluster, sizes)
    for result in reads:
        progress(f"spark: {result.key} {result.name}: {result.value:,.2f} {result.unit} ({result.detail})")
    try:
        tiering = _cluster_tiering(cluster, sizes)
    except RuntimeError as error:  # the Connect lines stand; the failed one says why
        tiering = Result(
            "S3", "Tiering round on a standalone cluster (2 workers)", 0.0, "records/s", None, "the same round on local[2]",
            0.0, 0.8, detail=f"failed: {str(error).strip().splitlines()[-1][:300]}", tier=CLUSTER_TIER,
        )
    progress(f"spark: S3 {tiering.name}: {tiering.value:,.0f} {tiering.unit}, {tiering.score:.2f}x ({tiering.detail})")
    return [*reads, tiering]


def _connect_reads(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    records = sizes.lake_records
    progress(f"spark: a lake-only table of {records:,} records; starting a Spark Connect server (local[2])")
    table = cluster.table("spark_connect_read", LAKE_PROPERTIES)
    cluster.produce(table, records)
    cluster.only_in_lake(table)
    with SparkConnectServer(port=0, master="local[2]").start() as connect:
        client = (cluster.server.address, str(table.path), str(records), connect.address, json.dumps(cluster.client_config()))
        progress("spark: the server's first client (its first lake read untimed for S1)")
        with ConnectClient(*client) as earlier_client:
            earlier = earlier_client.first
        progress("spark: a new client's first lake read through Spark Connect, then warm reads in turns with PyIceberg's")
        with ConnectClient(*client) as measured_client:
            measured = measured_client.first
            baseline_s, measured["warm"] = medians_in_turns(
                sizes.runs, Trial(lambda: pyiceberg_scan(cluster, table.path)), Trial(measured_client.scan)
            )
    cluster.drop(table)
    first = Result(
        "S1", "Spark Connect: first lake read of a new client", measured["first_records"], "s", None, "", measured["first_records"],
        2.0, lower_is_better=True, tier="lake (Spark Connect)",
        detail=f"connect to first lake records; its whole first scan of {records:,} records {measured['first_scan']:.2f} s;"
        f" the server's first client (its first jobs ever) {earlier['first_records']:.2f} s",
        next_step="a task's rows reach the client only once the task is done, and each bucket's first partition was "
        "a whole data file (a million records: 1.4 s of one task, 2.4 s to the first records on a warm server); the "
        "first file of a read is now split by its footer, its first partition one row group "
        "(lake/spark_file_task.plan_parts): 0.62-0.74 s to the first records in the same setup. What is left: the "
        "client's PyIceberg import (0.6 s, on its first lake read), catalog and planning (0.25 s)",
    )
    warm = Result(
        "S2", "Spark Connect: PySpark LogSource, warm", records / measured["warm"], "records/s", records / baseline_s,
        "PyIceberg scan().to_arrow(), same rows", baseline_s / measured["warm"], 0.5, tier="lake (Spark Connect)",
        detail=f"{records:,} records, median of {sizes.runs} scans, Connect server on local[2]",
        next_step="the scan is CPU-bound on this machine's 2 shared cores, and carries what PyIceberg's read does "
        "not: the bytes through Spark. Tasks fetch the wanted column chunks as the files hold them and the client "
        "decodes them (lake/spark_file_task.py, lake/fetched_row_groups.py); Python workers freeze their heap "
        "against PySpark's full gc.collect() after every task (spark_runtime/worker_heap.py); the server's JVM runs "
        "C1 alone and takes task results up to 64 MB directly, not through the block manager "
        "(spark_runtime/connect_server.py). CPU per scan: the client 1.2-1.4 s, most of it decoding Parquet as "
        "PyIceberg does; the JVM 0.6-0.7 s (task threads 0.35-0.4 s moving the bytes into rows and Connect's "
        "Arrow answer, gRPC 0.1 s, task results 0.05 s); each Python worker under 0.1 s. Runs in this benchmark's "
        "order give 0.34-0.62 with the load of the other processes on the cores. Next: the JVM's copies of each byte, "
        "and the buckets' Spark jobs, which the FIFO scheduler runs one after the other (a bucket's first rows "
        "come 0.12, 0.28, 0.44 and 0.65 s into a scan)",
    )
    return [first, warm]


def _cluster_tiering(cluster: BenchCluster, sizes: Sizes) -> Result:
    records = sizes.tier_records
    progress("spark: PostgreSQL catalog, a server whose lake is on it and S3, a standalone cluster of 2 workers")
    postgres = PostgresServer().start()
    standalone = StandaloneCluster(workers=2).start()
    s3 = json.dumps(cluster.client_config())
    try:
        server = HostedServer(
            {
                "data.dir": str(cluster.directory / "spark-paths"),
                "server.port": 0,
                "remote.log.task-interval": "1h",
                "remote.data.dir": f"s3://{S3_BUCKET}/spark-paths",
                **cluster.s3.settings(),
                "datalake.iceberg.uri": postgres.uri,
                "datalake.iceberg.warehouse": f"s3://{S3_BUCKET}/spark-paths-lake",
                "datalake.iceberg.s3.endpoint": cluster.s3.endpoint,
            }
        )
        try:
            with cluster.connect(server=server) as conn:
                local_table = cluster.table("tier_local", {"table.datalake.enabled": "true"}, conn)
                cluster_table = cluster.table("tier_standalone", {"table.datalake.enabled": "true"}, conn)
            progress(f"spark: tiering rounds of {records:,} records on local[2]")
            local = _run_script(TIERING_DRIVER, server.address, str(local_table.path), "local[2]", str(records), str(sizes.runs), s3)
            progress(f"spark: tiering rounds of {records:,} records on {standalone.master_url}")
            on_cluster = _run_script(
                TIERING_DRIVER, server.address, str(cluster_table.path), standalone.master_url, str(records), str(sizes.runs), s3,
                env={"PYSPARK_SUBMIT_ARGS": submit_args()},
            )
        finally:
            server.stop()
    finally:
        standalone.stop()
        postgres.stop()
    return Result(
        "S3", "Tiering round on a standalone cluster (2 workers)", records / on_cluster["round"], "records/s",
        records / local["round"], "the same round on local[2]", local["round"] / on_cluster["round"], 0.8,
        tier=CLUSTER_TIER,
        detail=f"{records:,} records per round, median of {sizes.runs} rounds after one untimed, 4 buckets",
    )
