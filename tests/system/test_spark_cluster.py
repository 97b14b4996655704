"""lakelog on a real standalone Spark cluster, with a lake every machine can share.

Real parts: a Spark master and two workers (one core each) started on loopback from pyspark's own
launcher (tests/harness/spark_standalone.py); the lake's Iceberg catalog is PyIceberg's SQL catalog on a
real PostgreSQL 15 server the test starts (tests/harness/postgres.py), its warehouse and the remote log
segments on moto S3. Executors share nothing with the driver but S3 and the catalog. The tiering job
and the readers run in their own processes (drivers), the way a user runs them; none is handed the
S3 endpoint of the remote segments: the cluster hands it out.

Also here: a lake local to the servers' machine (the embedded SQLite catalog and ``file://``
warehouse) is refused with the keys to set, by a tiering job on a Spark cluster and by a client on
another machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.errors import InvalidConfigError
from lakelog.lake_config import HOST_ID_ENV
from lakelog.server.server_process import ServerProcess
from lakelog.spark_runtime.connect_server import SparkConnectServer
from lakelog.tiering.kill_points import AFTER_WRITE, KILL_AT_ENV
from tests.harness.lake_tier import LAKE_TABLE, assert_lake_holds_log, expire_remote, lake_table
from tests.harness.postgres import PostgresServer
from tests.harness.s3 import REGION, MotoS3
from tests.harness.spark_standalone import EXECUTOR_CONF, StandaloneCluster, cluster_environment, submit_args
from tests.harness.tables import create_table, log_rows, order_rows, produce_orders

BUCKETS = 2
PATH = lakelog.TablePath("shop", "orders")
REPOSITORY = Path(__file__).resolve().parents[2]
# Two tiering drivers and four Spark applications on a shared 2-core machine: setup alone takes minutes.
pytestmark = pytest.mark.timeout(900)
CATALOG = "cluster-lake"  # PyIceberg reads PYICEBERG_CATALOG__CLUSTER_LAKE__* as catalog "cluster-lake"


@pytest.fixture(scope="module")
def cluster() -> Iterator[StandaloneCluster]:
    started = StandaloneCluster(workers=2).start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    yield server
    server.stop()


def _driver_env(**extra: str) -> dict[str, str]:
    """A driver process on the cluster: executors sized to fit a worker."""
    return {**cluster_environment(), "PYSPARK_SUBMIT_ARGS": submit_args(), **extra}


def _tier(address: str, master: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`lakelog tier --once` on ``master``; no remote-storage or catalog setting of its own."""
    command = [sys.executable, "-m", "lakelog", "tier", "--bootstrap", address, "--once", "--spark-master", master, "--table", str(PATH)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=_driver_env(**env))


@dataclass
class ClusterLake:
    server: ServerProcess
    killed: subprocess.CompletedProcess[str]
    rerun: subprocess.CompletedProcess[str]
    executor_hosts: int
    lake_rows: pa.Table
    truth: pa.Table  # every record of the log, by bucket and offset, read before remote expiry
    buckets: dict[int, lakelog.BucketInfo]


@pytest.fixture(scope="module")
def cluster_lake(
    cluster: StandaloneCluster, postgres: PostgresServer, moto_s3: MotoS3, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterLake]:
    """A server whose remote segments, lake catalog and warehouse are all shared (S3, PostgreSQL);
    its log tiered on the cluster by a job killed after writing its files, then rerun; then more
    records, and the remote TTL expiring what the lake holds: the oldest offsets only in the lake,
    the next in remote segments, the newest on local disk."""
    bucket = moto_s3.create_bucket()
    conf = {
        "data.dir": str(tmp_path_factory.mktemp("cluster-lake")),
        "server.port": 0,
        "log.segment.max-bytes": "64kb",
        "remote.log.task-interval": "1h",
        "remote.data.dir": f"s3://{bucket}/remote",
        **moto_s3.settings(),
        "datalake.catalog-name": CATALOG,
        "datalake.iceberg.type": "sql",
        "datalake.iceberg.uri": postgres.uri,
        "datalake.iceberg.warehouse": f"s3://{bucket}/warehouse",
        "datalake.iceberg.s3.endpoint": moto_s3.endpoint,
        "datalake.iceberg.s3.region": REGION,
    }
    server = ServerProcess(conf).start()
    assert server.tablet is not None
    remote = server.tablet.remote
    properties = {**LAKE_TABLE, "table.log.ttl": "1h", "table.log.tiered.local-segments": "1"}
    with lakelog.connect(server.address, {"client.lake.enabled": "false"}) as conn:
        table = create_table(conn, buckets=BUCKETS, properties=properties)
        produce_orders(table, 0, 40_000)
        remote.run_once()  # most of each bucket now only in S3: the tiering tasks read it there

        killed = _tier(server.address, cluster.master_url, **{KILL_AT_ENV: AFTER_WRITE})
        produce_orders(table, 40_000, 10_000)
        remote.run_once()
        rerun = _tier(server.address, cluster.master_url)
        hosts = cluster.executor_hosts()
        lake_rows = assert_lake_holds_log(server, PATH) if rerun.returncode == 0 else pa.table({})

        # Each bucket rolls segments past the lake's end: batches of 2,000 records (a flush seals each;
        # a writer gathers appends into one batch of up to client.writer.batch-size otherwise), sent to
        # every bucket in turn, so the uploads below leave remote segments the lake does not hold.
        with table.new_append().create_writer() as writer:
            for first in range(50_000, 60_000, 2_000):
                for bucket in range(BUCKETS):
                    writer.append_arrow(order_rows(first + bucket * 10_000, 2_000), bucket=bucket)
                writer.flush()
        remote.run_once()
        truth = log_rows(server.address, PATH)
        assert expire_remote(remote, days=2).expired > 0
        buckets = conn.admin.describe_buckets(PATH)
    yield ClusterLake(server, killed, rerun, hosts, lake_rows, truth, buckets)
    server.stop(0)


def test_tiering_killed_mid_round_on_the_cluster_and_rerun_holds_every_offset_once(cluster_lake: ClusterLake) -> None:
    assert cluster_lake.killed.returncode == -signal.SIGKILL, cluster_lake.killed.stderr[-3000:]
    assert cluster_lake.rerun.returncode == 0, cluster_lake.rerun.stderr[-3000:]
    # assert_lake_holds_log ran after the rerun: every offset of 0..50000 once, with the log's values.
    assert cluster_lake.lake_rows.num_rows == 50_000
    assert cluster_lake.executor_hosts == 2, "both workers ran executors of the tiering job"
    # The killed round's files were never committed: the one snapshot is the rerun's.
    table = lake_table(cluster_lake.server, PATH)
    assert len(list(table.snapshots())) == 1
    assert table.location().startswith("s3://")
    assert sum(info.lake_log_end_offset for info in cluster_lake.buckets.values()) == 50_000
    for info in cluster_lake.buckets.values():
        assert info.lake_log_start_offset == 0
        assert 0 < info.remote_log_start_offset <= info.lake_log_end_offset < info.remote_log_end_offset
        assert info.remote_log_start_offset < info.local_log_start_offset < info.high_watermark


PLAIN_PYICEBERG = textwrap.dedent(
    """
    from pyiceberg.catalog import load_catalog
    table = load_catalog("cluster-lake").load_table(("shop", "orders"))  # everything from PYICEBERG_CATALOG__*
    print(table.scan().to_arrow().num_rows)
    """
)


def test_plain_pyiceberg_reads_the_lake_under_the_configured_catalog_name(
    cluster_lake: ClusterLake, postgres: PostgresServer, moto_s3: MotoS3
) -> None:
    """PyIceberg's own configuration (here its environment variables) under ``datalake.catalog-name``."""
    env = {
        "PYICEBERG_CATALOG__CLUSTER_LAKE__URI": postgres.uri,
        "PYICEBERG_CATALOG__CLUSTER_LAKE__TYPE": "sql",
        "PYICEBERG_CATALOG__CLUSTER_LAKE__S3__ENDPOINT": moto_s3.endpoint,
        "PYICEBERG_CATALOG__CLUSTER_LAKE__S3__REGION": REGION,
    }
    result = subprocess.run([sys.executable, "-c", PLAIN_PYICEBERG], capture_output=True, text=True, timeout=120, env={**os.environ, **env})
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout.strip()) == cluster_lake.lake_rows.num_rows == 50_000


READER = textwrap.dedent(
    """
    import json, sys
    address, table, master, out = sys.argv[1:]
    import pyarrow.parquet as pq
    import lakelog, lakelog.spark
    from lakelog.spark_runtime.spark_session import spark_session
    from tests.harness.tables import scan_all

    spark = spark_session(master, "lakelog-cluster-reader")
    lakelog.spark.register(spark)
    frame = spark.read.format("lakelog").option("bootstrap", address).option("table", table).load()
    pq.write_table(frame.toArrow(), f"{out}/spark-reader.parquet")
    pq.write_table(frame.where("__bucket = 1 AND __offset >= 100").toArrow(), f"{out}/spark-reader-filtered.parquet")

    with lakelog.connect(address, {"client.lake.source": "iceberg", "lake.spark.master": master}) as conn:
        path = lakelog.TablePath(*table.split("."))
        total = sum(conn.admin.list_offsets(path).values())
        with conn.get_table(path).new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            pq.write_table(scan_all(scanner, total), f"{out}/log-source.parquet")
            print(json.dumps(scanner.records_by_tier()))
    spark.stop()
    """
)


def _by_offset(rows: pa.Table) -> pa.Table:
    return rows.sort_by([("__bucket", "ascending"), ("__offset", "ascending")])


def _read_through(master: str, cluster_lake: ClusterLake, out: Path) -> None:
    """The Spark reader and the PySpark LogSource, both on ``master``, read the whole table exactly."""
    result = subprocess.run(
        [sys.executable, "-c", READER, cluster_lake.server.address, str(PATH), master, str(out)],
        capture_output=True, text=True, timeout=300, env=_driver_env(), cwd=REPOSITORY,
    )
    assert result.returncode == 0, "\n".join(line for line in result.stderr.splitlines() if not line.startswith("\tat "))[-4000:]
    tiers = json.loads(result.stdout.strip().splitlines()[-1])
    assert tiers["lake"] > 0 and tiers["remote"] > 0 and tiers["local"] > 0, tiers
    truth = cluster_lake.truth
    assert _by_offset(pq.read_table(out / "log-source.parquet")).equals(truth)
    spark_rows = _by_offset(pq.read_table(out / "spark-reader.parquet"))
    assert spark_rows.column_names == truth.column_names
    for name in truth.column_names:
        assert spark_rows.column(name).equals(truth.column(name)), name
    filtered = _by_offset(pq.read_table(out / "spark-reader-filtered.parquet"))
    want = truth.filter(pc.and_(pc.equal(truth.column("__bucket"), 1), pc.greater_equal(truth.column("__offset"), 100)))
    assert filtered.column("__offset").equals(want.column("__offset")) and filtered.column("id").equals(want.column("id"))


def test_the_spark_reader_and_the_log_source_read_the_table_through_the_cluster(
    cluster: StandaloneCluster, cluster_lake: ClusterLake, tmp_path: Path
) -> None:
    _read_through(cluster.master_url, cluster_lake, tmp_path)


def test_the_spark_reader_and_the_log_source_read_the_table_through_spark_connect_on_the_cluster(
    cluster: StandaloneCluster, cluster_lake: ClusterLake, tmp_path: Path
) -> None:
    with SparkConnectServer(port=0, master=cluster.master_url, conf=EXECUTOR_CONF).start() as connect:
        _read_through(connect.address, cluster_lake, tmp_path)


# ---------------------------------------------------------------- a lake local to the servers' machine


LOCAL_LAKE_KEYS = ("datalake.iceberg.uri=sqlite:///", "datalake.iceberg.warehouse=file:///", "set datalake.iceberg.uri", "datalake.iceberg.warehouse to shared storage")


def test_a_tiering_job_on_a_cluster_refuses_the_servers_local_lake(
    cluster: StandaloneCluster, server_factory: Callable[..., ServerProcess]
) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        produce_orders(create_table(conn, buckets=BUCKETS, properties=LAKE_TABLE), 0, 1000)
    result = _tier(server.address, cluster.master_url)
    assert result.returncode == 1, result.stderr[-3000:]
    assert f"Spark in cluster mode ({cluster.master_url}) cannot share it" in result.stderr
    for text in LOCAL_LAKE_KEYS:
        assert text in result.stderr, result.stderr[-3000:]
    assert not (server.data_dir / "lake" / "warehouse" / "shop").exists() or not any(
        (server.data_dir / "lake" / "warehouse").rglob("*.parquet")
    ), "nothing was written"


def test_a_client_on_another_machine_refuses_the_servers_local_lake(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        create_table(conn, properties=LAKE_TABLE)
    elsewhere = textwrap.dedent(
        """
        import sys, lakelog
        with lakelog.connect(sys.argv[1]) as conn:
            conn.lake_catalog()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", elsewhere, server.address], capture_output=True, text=True, timeout=60,
        env={**os.environ, HOST_ID_ENV: "another-machine"},
    )
    assert result.returncode == 1
    assert "InvalidConfigError" in result.stderr and "this machine (another-machine, not " in result.stderr
    for text in LOCAL_LAKE_KEYS:
        assert text in result.stderr, result.stderr[-3000:]
    # On the servers' own machine the same catalog opens.
    with lakelog.connect(server.address) as conn:
        assert conn.lake_catalog().load_table(PATH) is not None


def test_the_refusal_names_only_the_local_parts() -> None:
    from lakelog.lake_config import LakeConfig

    shared = LakeConfig(catalog_properties={"uri": "postgresql+psycopg2://db/lake", "warehouse": "s3://b/w"}, server_host="x")
    shared.refuse_local_parts("anyone")
    half = LakeConfig(catalog_properties={"uri": "postgresql+psycopg2://db/lake", "warehouse": "/srv/lake"}, server_host="x")
    with pytest.raises(InvalidConfigError, match=r"\(datalake.iceberg.warehouse=/srv/lake\), and anyone cannot share it"):
        half.refuse_local_parts("anyone")


def test_the_cluster_hands_out_its_remote_storage_settings_but_no_secret(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory(
        **{
            "remote.fs.s3.endpoint": "http://s3.example:9000",
            "remote.fs.s3.region": "eu-west-3",
            "remote.fs.s3.access-key": "AKIA-not-for-clients",
            "remote.fs.s3.secret-key": "not-for-clients",
        }
    )
    with lakelog.connect(server.address) as conn:
        handed_out = conn.admin.get_lake_config()
    assert dict(handed_out.remote_fs) == {"s3.endpoint": "http://s3.example:9000", "s3.region": "eu-west-3"}
    assert "not-for-clients" not in repr(handed_out)
