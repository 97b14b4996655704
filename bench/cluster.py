"""What every benchmark runs against: moto's S3 server and an embedded lakelog server, each in a
process of its own, the server's remote storage that S3 and its lake a SQLite Iceberg catalog, all
in a temp directory outside the repo; plus the steps that move a table's records into a tier.

Background remote passes are off (``remote.log.task-interval`` 1h): a benchmark moves data between
tiers itself, one pass at a time, as ``lakelog demo`` does, so nothing moves while it measures.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs
from pyiceberg.io.pyarrow import schema_to_pyarrow

import lakelog
from lakelog.lake.lake_catalog import LakeCatalog
from lakelog.lake_config import LakeConfig
from lakelog.lake.snapshot_summary import latest_lake_snapshot
from lakelog.lake.table_layout import data_location, new_data_file_path
from lakelog.metadata import LakeSnapshot, OffsetSpec, TableDescriptor, TablePath
from lakelog.tiering.lake_commit import commit_files, next_offsets
from lakelog.log_ranges import split_range
from lakelog.tiering.tiering_split import TieringSplit
from lakelog.tiering.split_writer import WriterSettings, write_split

from bench import data, server_host
from bench.measure import progress
from bench.server_host import HostedServer

DATABASE = "bench"
S3_BUCKET = "lakelog-bench"
AWS_ENVIRONMENT = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}
# A lake table whose records live only in the lake: expire remote segments at once, keep one local segment.
LAKE_PROPERTIES = {"table.datalake.enabled": "true", "table.log.ttl": "1ms", "table.log.tiered.local-segments": "1"}
REMOTE_PROPERTIES = {"table.log.tiered.local-segments": "1"}
CLUSTER_SECRET = "lakelog-bench-cluster"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tablet_server_config(base: dict[str, Any], directory: Path, coordinator: str, server_id: int) -> dict[str, Any]:
    """The configuration of tablet server ``server_id`` of a cluster in ``directory``: the same on
    every restart, so a restarted server comes back with its data dir and id."""
    return {**base, "data.dir": str(directory / f"tablet-{server_id}"), "coordinator.address": coordinator, "tablet-server.id": server_id}


def _pieces(start: int, end: int, count: int | None) -> list[tuple[int, int]]:
    """``[start, end)`` in ``count`` nearly equal pieces, or as the tiering job splits it (None)."""
    if count is None:
        return split_range(start, end)
    step = max(-(-(end - start) // count), 1)
    return [(first, min(first + step, end)) for first in range(start, end, step)]


class MotoServer:
    """moto's S3 in a process of its own, so its request handling does not share this process's GIL
    with the client being measured."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **AWS_ENVIRONMENT},
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self._proc.poll() is not None:
                    raise RuntimeError("moto's S3 server did not start") from None
                time.sleep(0.2)
        request = urllib.request.Request(f"{self.endpoint}/{S3_BUCKET}", method="PUT")
        urllib.request.urlopen(request, timeout=10).close()

    def settings(self) -> dict[str, str]:
        """Config keys that point a lakelog server or client at this S3."""
        return {"remote.fs.s3.endpoint": self.endpoint, "remote.fs.s3.region": AWS_ENVIRONMENT["AWS_REGION"]}

    def file_system(self) -> pafs.S3FileSystem:
        """A bare pyarrow S3 client of this server: the baseline's way in."""
        endpoint = urlparse(self.endpoint)
        return pafs.S3FileSystem(endpoint_override=endpoint.netloc, scheme=endpoint.scheme, region=AWS_ENVIRONMENT["AWS_REGION"])

    def stop(self) -> None:
        self._proc.terminate()
        self._proc.wait(10)


class BenchCluster:
    """Start with ``with``; tables are made by :meth:`table` and dropped by :meth:`drop`."""

    def __init__(self, segment_bytes: int) -> None:
        os.environ.update({key: os.environ.get(key, value) for key, value in AWS_ENVIRONMENT.items()})
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        self.directory = Path(tempfile.mkdtemp(prefix="lakelog-bench-"))
        self.segment_bytes = segment_bytes
        self.s3 = MotoServer()
        self._servers: list[HostedServer] = []
        self._spark: Any = None
        try:  # a server that cannot start must not leave S3 and the servers before it running
            self.server = self.start_server("sync")
            self.conn = lakelog.connect(self.server.address, self.client_config())
            self.conn.admin.create_database(DATABASE, ignore_if_exists=True)
        except BaseException:
            self._stop_processes()
            raise

    def start_cluster(self, name: str, tablet_servers: int, extra: dict[str, Any] | None = None) -> list[HostedServer]:
        """A coordinator, then ``tablet_servers`` tablet servers (ids 1, 2, ...) registered with it,
        each in a process of its own; the coordinator first. The caller stops them."""
        directory = self.directory / name
        base = {
            "server.port": 0, "log.segment.max-bytes": self.segment_bytes, "remote.log.task-interval": "1h",
            "cluster.secret": CLUSTER_SECRET, **(extra or {}),
        }
        coordinator = HostedServer({**base, "data.dir": str(directory / "coordinator")}, ("coordinator",))
        return [coordinator] + [
            HostedServer(tablet_server_config(base, directory, coordinator.address, server_id), ("tablet-server",))
            for server_id in range(1, tablet_servers + 1)
        ]

    def start_server(self, flush_mode: str, remote: str = "s3") -> HostedServer:
        """Another embedded server (coordinator + tablet server) in its own process with its own data
        dir, its remote storage on this S3 or (``remote="file"``) a local directory; stopped by :meth:`close`."""
        name = f"server-{len(self._servers)}-{flush_mode}"
        remote_dir = f"s3://{S3_BUCKET}/{name}" if remote == "s3" else (self.directory / name / "remote").as_uri()
        config = {
            "data.dir": str(self.directory / name),
            "server.port": 0,
            "log.segment.max-bytes": self.segment_bytes,
            "log.flush.mode": flush_mode,
            "remote.log.task-interval": "1h",
            "remote.data.dir": remote_dir,
            **self.s3.settings(),
        }
        server = HostedServer(config)
        self._servers.append(server)
        return server

    def client_config(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """A client's config: it reads remote segments from this S3 itself, with its own settings."""
        return {**self.s3.settings(), **(extra or {})}

    def connect(self, extra: dict[str, Any] | None = None, server: HostedServer | None = None) -> lakelog.Connection:
        return lakelog.connect((server or self.server).address, self.client_config(extra))

    # tables

    def table(
        self,
        name: str,
        properties: dict[str, str] | None = None,
        conn: lakelog.Connection | None = None,
        buckets: int = 4,
        schema: pa.Schema = data.SCHEMA,
    ) -> lakelog.Table:
        conn = conn or self.conn
        path = TablePath(DATABASE, name)
        conn.admin.create_database(DATABASE, ignore_if_exists=True)
        conn.admin.create_table(path, TableDescriptor(schema, buckets, properties or {}))
        return conn.get_table(path)

    def drop(self, table: lakelog.Table, server: HostedServer | None = None) -> None:
        """Drop the table, so later remote passes neither upload nor keep its data."""
        with self.connect(server=server) as conn:
            conn.admin.drop_table(table.path)
        (server or self.server).call(server_host.remote_pass)  # deletes the dropped table's remote files

    @staticmethod
    def produce(table: lakelog.Table, count: int, start: int = 0, batches: list[pa.RecordBatch] | None = None) -> None:
        """``count`` records of the benchmark table from ``start`` (or the given ``batches``)."""
        with table.new_append().create_writer() as writer:
            for batch in data.chunks(count, start) if batches is None else batches:
                writer.append_arrow(batch)

    # moving records between tiers

    def to_remote(self, table: lakelog.Table, server: HostedServer | None = None) -> None:
        """Roll every bucket and upload what is rolled (:func:`bench.server_host.to_remote`)."""
        (server or self.server).call(server_host.to_remote, table.info.table_id, table.info.buckets)

    def to_lake(self, table: lakelog.Table, files_per_bucket: int | None = None) -> None:
        """Copy the records not yet in the lake into it as ``files_per_bucket`` data files per bucket
        (None: as many as a tiering round would write) and commit them: the tiering job's own task (:func:`write_split`) and commit, run in this
        process instead of in Spark tasks, which is quicker for setting data up."""
        path = table.path
        with lakelog.connect(self.server.address, self.client_config({"client.lake.enabled": False})) as conn:
            lake_table = conn.lake_catalog().load_table(path)
            lake = latest_lake_snapshot(lake_table)
            ends = conn.admin.list_offsets(path, spec=OffsetSpec.latest())
            starts = {b: (lake.bucket_offsets[b].log_end_offset if lake and b in lake.bucket_offsets else 0) for b in ends}
            root = data_location(lake_table)
            splits = [
                TieringSplit(path, bucket, first, last, new_data_file_path(root, bucket, first, last))
                for bucket, end in ends.items()
                for first, last in _pieces(starts[bucket], end, files_per_bucket)
            ]
            settings = WriterSettings(
                bootstrap=self.server.address,
                client_config=self.client_config({"client.lake.enabled": False}),
                io_properties=dict(conn.lake_config().catalog_properties),
                lake_schemas={str(path): schema_to_pyarrow(lake_table.schema())},
            )
            progress(f"  writing {len(splits)} lake data files of {path}")
            with ThreadPoolExecutor(2) as pool:
                written = list(pool.map(lambda split: write_split(conn, settings, split), splits))
            offsets = next_offsets(lake, written)
            snapshot_id = commit_files(lake_table, written, offsets, "lakelog-bench")
            if snapshot_id is None:
                raise RuntimeError(f"{path}: the lake moved while the benchmark set it up")
            conn.internal_admin.commit_lake_snapshot(path, LakeSnapshot(snapshot_id, offsets))

    def only_in_lake(self, table: lakelog.Table, files_per_bucket: int | None = None) -> None:
        """Everything produced so far readable from the lake only: tier it, upload it, expire it."""
        self.to_lake(table, files_per_bucket)
        self.to_remote(table)

    def lake_catalog(self) -> LakeCatalog:
        return LakeCatalog(LakeConfig.from_configuration(self.server.conf, self.server.data_dir))

    def spark(self) -> Any:
        """One local[2] SparkSession, shared by the Spark lake reads and the tiering rounds."""
        from lakelog.spark_runtime.spark_session import spark_session

        if self._spark is None:
            self._spark = spark_session("local[2]", "lakelog-bench")
        return self._spark

    def close(self) -> None:
        self.conn.close()
        if self._spark is not None:
            try:
                self._spark.stop()
            except Exception as exc:  # noqa: BLE001 - a JVM already gone must not lose the run's report
                progress(f"Spark did not stop cleanly: {type(exc).__name__}")
        self._stop_processes()

    def _stop_processes(self) -> None:
        """The servers, then S3; the cluster's directory goes with them."""
        for server in reversed(self._servers):
            server.stop()
        self.s3.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> "BenchCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def log_bytes(table: lakelog.Table, cluster: BenchCluster) -> int:
    """Bytes of the table's record batches on the server's disk: what a full scan moves."""
    return cluster.server.call(server_host.log_bytes, table.info.table_id, table.info.buckets)
