"""Spark Connect as the way clients and the tiering job reach Spark (docs/contract.md, "Client API", "Tiering, consistent cuts and cursors" and "Operations").

Real parts: `lakelog spark-connect` (the session-shared ``spark_connect`` fixture, a JVM started
from the installed pyspark), a coordinator started with ``lake.spark.master=sc://…``, and a tiering
job and a client that run in their own processes with ``JAVA_HOME`` pointing nowhere: they can only
succeed without a JVM of their own, through the Connect server the coordinator advertises.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.server.server_process import ServerProcess
from lakelog.spark_runtime.connect_server import SparkConnectServer
from lakelog.spark_runtime.spark_session import QUIET_LOG4J2, spark_log_conf
from tests.harness.lake_files import lake_file
from tests.harness.lake_tier import LAKE_TABLE
from tests.harness.spark_connect import start_spark_connect
from tests.harness.tables import create_table
from tests.harness.three_tiers import BUCKETS, PROJECTION, TieredLog, assert_rows, build_tiered_log

# Neither process may start a JVM: with this, one that tried would fail.
NO_JAVA = {"JAVA_HOME": "/nonexistent-java"}
AUTO_LOG = "lakelog.client.lake.lake_sources"


def _tier_through_the_advertised_spark(address: str, path: lakelog.TablePath) -> None:
    """`lakelog tier --once` with no --spark-master: it must use the coordinator's."""
    command = [sys.executable, "-m", "lakelog", "tier", "--bootstrap", address, "--once", "--table", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env={**os.environ, **NO_JAVA})
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="module")
def tiered(spark_connect: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredLog]:
    """Two tiering rounds through Spark Connect (two data files per bucket), then the remote TTL: the
    oldest offsets only in the lake, the next in remote segments, the newest on local disk."""
    data_dir = tmp_path_factory.mktemp("connect-lake")
    built = build_tiered_log(data_dir, _tier_through_the_advertised_spark, {"lake.spark.master": spark_connect}, nullcontext)
    yield built
    built.server.stop(0)


CONNECT_CLIENT = textwrap.dedent(
    """
    import json, logging, os, sys
    address, path, columns, out = sys.argv[1:]
    logging.basicConfig(level=logging.INFO, format="LOG %(name)s %(message)s")
    import pyarrow.parquet as pq
    import lakelog
    from tests.harness.tables import scan_all

    path = lakelog.TablePath(*path.split("."))
    with lakelog.connect(address) as conn:  # no client.lake.source, no lake.spark.master: auto + advertised
        total = sum(conn.admin.list_offsets(path).values())
        with conn.get_table(path).new_scan().project(columns.split(",")).create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            pq.write_table(scan_all(scanner, total), out)
            tiers = scanner.records_by_tier()

    import pyspark
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    children = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            if pid.isdigit() and int(fields[1]) == os.getpid():
                children.append(open(f"/proc/{pid}/comm").read().strip())
        except (OSError, IndexError):
            pass
    session = ConnectSession._get_default_session()  # made on the lake reader's thread, so not this one's active session
    print(json.dumps({
        "tiers": tiers,
        "connect_session": session is not None and type(session).__module__,
        "py4j_gateway": pyspark.SparkContext._gateway is not None,
        "children": children,
    }))
    """
)


def test_a_client_without_a_jvm_reads_every_tier_through_spark_connect(tiered: TieredLog, tmp_path: Path) -> None:
    out = tmp_path / "read.parquet"
    result = subprocess.run(
        [sys.executable, "-c", CONNECT_CLIENT, tiered.server.address, str(tiered.path), ",".join(PROJECTION), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **NO_JAVA},
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["connect_session"] == "pyspark.sql.connect.session", result.stdout + result.stderr[-3000:]
    assert not report["py4j_gateway"] and "java" not in report["children"], report
    assert report["tiers"]["lake"] > 0 and report["tiers"]["remote"] > 0 and report["tiers"]["local"] > 0, report
    chosen = [line for line in result.stderr.splitlines() if line.startswith(f"LOG {AUTO_LOG} client.lake.source=auto")]
    assert len(chosen) == 1 and "with iceberg (Spark at sc://127.0.0.1:" in chosen[0], result.stderr[-3000:]

    got = pq.read_table(out)
    assert got.num_rows == tiered.truth.num_rows
    for bucket in range(BUCKETS):
        mine = got.filter(pc.equal(got.column("__bucket"), bucket))
        assert mine.column("__offset").to_pylist() == list(range(tiered.buckets[bucket].high_watermark))
        assert_rows(mine, tiered.rows(bucket), PROJECTION)


FOUND_SOURCE_CLIENT = textwrap.dedent(
    """
    import sys
    address, spark_master, table, bucket, start = sys.argv[1:]
    from pyspark.sql.connect.session import SparkSession
    spark = SparkSession.builder.remote(spark_master).getOrCreate()
    frame = spark.read.format("lakelog").option("bootstrap", address).load(table)  # no lakelog.spark.register()
    rows = frame.where(f"__bucket = {bucket} AND __offset >= {start}").select("__offset", "id").collect()
    print(",".join(f"{row[0]}:{row[1]}" for row in rows))
    spark.stop()
    """
)


def test_format_lakelog_works_without_register_through_spark_connect(tiered: TieredLog, spark_connect: str) -> None:
    """Spark finds the source in module ``pyspark_lakelog`` by itself (the Connect server's Spark)."""
    start = tiered.lake_only_end(1) - 5
    result = subprocess.run(
        [sys.executable, "-c", FOUND_SOURCE_CLIENT, tiered.server.address, spark_connect, str(tiered.path), "1", str(start)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **NO_JAVA},
    )
    assert result.returncode == 0, "\n".join(line for line in result.stderr.splitlines() if not line.startswith("\tat "))[-3000:]
    got = sorted(tuple(map(int, pair.split(":"))) for pair in result.stdout.strip().split(","))
    want = tiered.rows(1, start)
    assert got == list(zip(want.column("__offset").to_pylist(), want.column("id").to_pylist()))


def test_a_second_server_on_a_taken_port_is_a_clear_error(spark_connect: str) -> None:
    port = spark_connect.rsplit(":", 1)[1]
    result = subprocess.run(
        [sys.executable, "-m", "lakelog", "spark-connect", "--port", port], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert f"port {port} on 127.0.0.1 is in use" in result.stderr


def _command_lines() -> Iterator[list[str]]:
    for proc in Path("/proc").iterdir():
        try:
            yield (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:  # a process that ended meanwhile, or one not ours to read
            continue


def test_the_servers_jvm_compiles_with_c1_only_and_a_callers_java_options_come_after_lakelogs(spark_connect: str) -> None:
    """The server's JVM only hands the Python tasks' batches on; C2 compiling Spark's code cost 0.6 s
    of CPU per lake read through a server's first ten on 2 cores, C1 alone a fraction of that. A
    caller's own Java options (the demo's quiet log4j2 file) are kept, after lakelog's, so that its
    own -XX flags win."""
    port = spark_connect.rsplit(":", 1)[1]
    jvms = [line for line in _command_lines() if f"spark.connect.grpc.binding.port={port}" in line and "java" in line[0]]
    assert len(jvms) == 1, jvms
    assert "-XX:TieredStopAtLevel=1" in jvms[0]
    options = SparkConnectServer(conf=spark_log_conf("ERROR")).conf["spark.driver.extraJavaOptions"]
    assert options == f"-XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile=file:{QUIET_LOG4J2}"


# ---------------------------------------------------------------- client.lake.source=auto


def _chosen_source(server: ServerProcess, caplog: pytest.LogCaptureFixture, **config: Any) -> list[str]:
    """What an auto client says it picked, on creating a scanner of a lake-enabled table."""
    with caplog.at_level(logging.INFO, logger=AUTO_LOG), lakelog.connect(server.address, config) as conn:
        table = create_table(conn, properties=LAKE_TABLE)
        for _ in range(2):  # said once per connection
            conn.get_table(table.path).new_scan().create_log_scanner().close()
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("client.lake.source=auto")]


@pytest.mark.parametrize(
    "server_master, client_config, picked",
    [
        ("", {}, "iceberg-arrow (no Spark endpoint known (lake.spark.master))"),
        ("", {"lake.spark.master": "local[1]"}, "iceberg (Spark at local[1])"),
        ("sc://127.0.0.1:1/;token=s3cr3t;user_id=me", {}, "iceberg (Spark at sc://127.0.0.1:1/;user_id=me)"),
        ("sc://127.0.0.1:1", {"lake.spark.master": "sc://127.0.0.1:2"}, "iceberg (Spark at sc://127.0.0.1:2)"),
    ],
    ids=["nothing known", "the client's own", "advertised, token kept on the server", "the client's beats the advertised"],
)
def test_auto_picks_the_pyspark_source_only_when_a_spark_endpoint_is_known(
    server_factory: Callable[..., ServerProcess],
    caplog: pytest.LogCaptureFixture,
    server_master: str,
    client_config: dict[str, str],
    picked: str,
) -> None:
    server = server_factory(**({"lake.spark.master": server_master} if server_master else {}))
    assert _chosen_source(server, caplog, **client_config) == [f"client.lake.source=auto: reading the lake with {picked}"]


# ---------------------------------------------------------------- one Connect session shared by clients


SHARED_SESSION_CLIENT = textwrap.dedent(
    """
    import json, os, sys, time
    address, path, columns, out, gate = sys.argv[1:]
    import pyarrow as pa
    import pyarrow.parquet as pq
    import lakelog
    from lakelog.spark_runtime import spark_session
    from tests.harness.tables import scan_all

    path = lakelog.TablePath(*path.split("."))

    def read():
        with lakelog.connect(address) as conn:
            total = sum(conn.admin.list_offsets(path).values())
            with conn.get_table(path).new_scan().project(columns.split(",")).create_log_scanner() as scanner:
                scanner.subscribe_from_beginning()
                return scan_all(scanner, total), scanner.records_by_tier()["lake"]

    own = spark_session.spark_session(gate[4:]) if gate.startswith("own=") else None  # a script's own Spark work
    if own is not None:
        assert own.range(3).count() == 3
    reads = [read()]
    (session,) = spark_session._shared.values()
    if own is not None:
        own.stop()  # its own session ends; the process must still exit
    elif gate == "-":
        session.stop()  # what a user's own spark.stop() on the session it found would do
    elif gate == "release":
        session.client.release_session()  # as the server does to a session idle past its timeout
    else:
        while not os.path.exists(gate):  # another client has closed its session and gone
            time.sleep(0.1)
        reads.append(read())
    pq.write_table(pa.concat_tables([table for table, _ in reads]), out)
    print(json.dumps({"session": session.session_id, "lake": [lake for _, lake in reads]}))
    """
)


def test_clients_share_one_connect_session_and_one_leaving_ends_it_for_none(tiered: TieredLog, tmp_path: Path) -> None:
    """Two client processes read at once in one shared session; one stops its session and exits;
    the other reads on, and a third joins and reads: every read exact, every one in the same session."""
    gate = tmp_path / "first-gone"

    def client(name: str, gate_arg: str) -> tuple[subprocess.Popen[str], Path]:
        out = tmp_path / f"{name}.parquet"
        command = [sys.executable, "-c", SHARED_SESSION_CLIENT, tiered.server.address, str(tiered.path), ",".join(PROJECTION)]
        process = subprocess.Popen(
            [*command, str(out), gate_arg], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **NO_JAVA}, cwd=Path(__file__).resolve().parents[2],
        )
        return process, out

    def finished(process: subprocess.Popen[str]) -> dict[str, Any]:
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr[-3000:]
        return json.loads(stdout.splitlines()[-1])

    leaving, staying = client("leaving", "-"), client("staying", str(gate))
    reports = [finished(leaving[0])]
    gate.touch()
    joining = client("joining", "-")
    reports += [finished(staying[0]), finished(joining[0])]

    assert len({report["session"] for report in reports}) == 1, reports
    assert [len(report["lake"]) for report in reports] == [1, 2, 1] and all(min(report["lake"]) > 0 for report in reports), reports
    for (_, out), reads in zip((leaving, staying, joining), (1, 2, 1)):
        got = pq.read_table(out)
        assert got.num_rows == reads * tiered.truth.num_rows
        for bucket in range(BUCKETS):
            mine = got.filter(pc.equal(got.column("__bucket"), bucket))
            assert mine.column("__offset").to_pylist() == list(range(tiered.buckets[bucket].high_watermark)) * reads


def test_a_new_client_steps_past_a_shared_session_the_server_closed(tiered: TieredLog, tmp_path: Path) -> None:
    """The server refuses a closed session id for good: a new client joins the next generation's."""
    outs = [tmp_path / "releasing.parquet", tmp_path / "next.parquet"]
    command = [sys.executable, "-c", SHARED_SESSION_CLIENT, tiered.server.address, str(tiered.path), ",".join(PROJECTION)]
    reports = []
    for out, gate in zip(outs, ("release", "-")):
        result = subprocess.run(
            [*command, str(out), gate], capture_output=True, text=True, timeout=150, env={**os.environ, **NO_JAVA},
            cwd=Path(__file__).resolve().parents[2],
        )
        assert result.returncode == 0, result.stderr[-3000:]
        reports.append(json.loads(result.stdout.splitlines()[-1]))
    assert reports[0]["session"] != reports[1]["session"], reports
    assert all(report["lake"][0] > 0 for report in reports), reports
    for out, reads in zip(outs, (1, 1)):
        got = pq.read_table(out)
        for bucket in range(BUCKETS):
            mine = got.filter(pc.equal(got.column("__bucket"), bucket))
            assert mine.column("__offset").to_pylist() == list(range(tiered.buckets[bucket].high_watermark)) * reads


def test_a_script_with_a_connect_session_of_its_own_reads_through_the_shared_one_and_exits(
    spark_connect: str, tiered: TieredLog, tmp_path: Path
) -> None:
    """Its own session and the shared one live side by side, and the process exits once done: the
    shared session's channel is closed while gRPC still runs, not left to interpreter shutdown
    (where closing it waited forever on a lock of a gRPC thread already frozen)."""
    out = tmp_path / "own.parquet"
    command = [sys.executable, "-c", SHARED_SESSION_CLIENT, tiered.server.address, str(tiered.path), ",".join(PROJECTION), str(out), f"own={spark_connect}"]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=150, env={**os.environ, **NO_JAVA}, cwd=Path(__file__).resolve().parents[2]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1])["lake"][0] > 0
    got = pq.read_table(out)
    for bucket in range(BUCKETS):
        mine = got.filter(pc.equal(got.column("__bucket"), bucket))
        assert mine.column("__offset").to_pylist() == list(range(tiered.buckets[bucket].high_watermark))


CLOSED_EARLY_CLIENT = textwrap.dedent(
    """
    import json, sys
    address, connect, path, data_file, rows = sys.argv[1:]
    import pyarrow as pa
    import lakelog
    from lakelog.config import Configuration
    from lakelog.lake.iceberg_file_reader import FileRange
    from lakelog.lake.iceberg_lake_storage import IcebergLakeStorage
    from lakelog.record.meta_columns import with_meta_fields
    from lakelog.spark_runtime.spark_session import shared_connect_session

    path = lakelog.TablePath(*path.split("."))
    with lakelog.connect(address) as conn:
        conf = Configuration({"client.lake.source": "iceberg", "lake.spark.master": connect})
        source = IcebergLakeStorage().create_log_source(conn.admin.get_table_info(path), conn.admin.get_lake_config(), conf)
        batches = source.read_files(conn.lake_catalog().load_table(path), [FileRange(data_file, 0, int(rows))], with_meta_fields(pa.schema([("id", pa.int32())])))
        first = next(batches)
        batches.close()  # as a scanner closed after its first records does
        still_running = shared_connect_session(connect).interruptAll()
    print(json.dumps({"first": first.column("__offset")[0].as_py(), "still_running": still_running}))
    """
)


def test_a_lake_read_closed_early_stops_its_spark_job(tiered: TieredLog, spark_connect: str, tmp_path: Path) -> None:
    """Through Connect a read is one job; a reader closed after its first records (a scanner closed,
    a bucket unsubscribed) must stop it, or Spark keeps reading the rest for no one and every later
    read waits behind it."""
    rows = 2_000_000
    data_file = lake_file(tmp_path / "big.parquet", 0, rows, 50_000)  # 40 row groups: seconds of Spark work
    result = subprocess.run(
        [sys.executable, "-c", CLOSED_EARLY_CLIENT, tiered.server.address, spark_connect, str(tiered.path), data_file, str(rows)],
        capture_output=True, text=True, timeout=300, env={**os.environ, **NO_JAVA},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer == {"first": 0, "still_running": []}


ORPHANED_CLIENT = textwrap.dedent(
    """
    import sys
    from lakelog.spark_runtime.spark_session import shared_connect_session

    assert shared_connect_session(sys.argv[1]).range(3).count() == 3
    print("read", flush=True)
    sys.stdin.readline()  # the test stops the Connect server, then lets the script end
    """
)


@pytest.mark.parametrize("stop", ["stopped", "killed", "paused"])
def test_a_script_exits_at_once_whatever_became_of_its_connect_server(tmp_path: Path, stop: str) -> None:
    """PySpark's own exit handler cleans up its session on the server, retrying for minutes against
    one that stopped; lakelog's shared sessions go without it (they hold nothing to clean), so the
    script ends as soon as its work is done, the server stopped, killed or hung."""
    server, address = start_spark_connect(tmp_path / "server.log")
    script = subprocess.Popen(
        [sys.executable, "-c", ORPHANED_CLIENT, address], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, **NO_JAVA}, cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert script.stdout is not None and script.stdout.readline() == "read\n", script.stderr.read() if script.stderr else ""
        # Stopped: the server stops its JVM itself. Killed and paused: the whole server, JVM included.
        if stop == "stopped":
            server.send_signal(signal.SIGTERM)
        else:
            os.killpg(server.pid, {"killed": signal.SIGKILL, "paused": signal.SIGSTOP}[stop])
        if stop != "paused":
            server.wait(60)
        stdout, stderr = script.communicate("\n", timeout=60)
        assert script.returncode == 0, stderr[-3000:]
    finally:
        script.kill()
        with contextlib.suppress(ProcessLookupError):  # nothing is left of a stopped or killed server
            os.killpg(server.pid, signal.SIGCONT)
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(60)
