"""A real cluster's faults, as an operator meets them: a coordinator and two tablet servers as
`lakelog coordinator` / `lakelog tablet-server` processes, remote storage on a moto S3 process,
one producer thread and one consumer running while a tablet server is killed (-9) and restarted,
the coordinator is killed and restarted, and the S3 process is frozen (SIGSTOP) and thawed.

Every record the producer was told is acknowledged is read exactly once, in order per bucket;
the producer never saw an error (no application retry); the frozen S3 is reported once per stalled
pass, with the upload backlog in the metrics; the figures (records sent, acknowledged, batches
resent, read; time to recover after each fault) are printed for the issue's closing note. A second
test restarts the in-memory S3, so every remote object vanishes: the servers notice by themselves.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator


import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import LakelogError
from tests.harness.metrics_scrape import metric_sum
from tests.harness.os_process import Process, port_open
from tests.harness.s3 import ACCESS_KEY, REGION, SECRET_KEY, free_port
from tests.harness.tables import ORDERS_SCHEMA
from tests.harness.waiting import wait_until

BUCKETS = 4
ROWS_PER_APPEND = 20
SECRET = "chaos-cluster-secret"
ENV = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION}


def create_bucket(port: int) -> str:
    import boto3

    bucket = f"chaos-{uuid.uuid4().hex[:10]}"
    boto3.client(
        "s3", endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY, region_name=REGION,
    ).create_bucket(Bucket=bucket)
    return bucket


@dataclass
class Cluster:
    tmp_path: Path
    s3: Process
    coordinator: Process
    tablets: dict[int, Process]
    coordinator_address: str
    bucket_name: str
    metrics_ports: dict[int, int]

    def tablet_log(self, server_id: int) -> str:
        return self.tablets[server_id].log_path.read_text(errors="replace")

    def restart(self, process: Process) -> float:
        """Start ``process`` again; seconds until it listens."""
        started = time.monotonic()
        with process.log_path.open("a") as out:
            out.write("\n---- restarted ----\n")
        process.start()
        return time.monotonic() - started


def lakelog_process(name: str, role: str, data_dir: Path, port: int, log_dir: Path, *extra: str) -> Process:
    args = [sys.executable, "-m", "lakelog", role, "--data-dir", str(data_dir), "--port", str(port), "--set", f"cluster.secret={SECRET}", *extra]
    return Process(name, args, log_dir, lambda: port_open(port), ENV)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    s3_port = free_port()
    s3 = Process("s3", [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(s3_port)], tmp_path, lambda: port_open(s3_port))
    processes = [s3.start()]
    try:
        bucket = create_bucket(s3_port)
        metrics_ports = {server_id: free_port() for server_id in (1, 2)}
        coordinator_port = free_port()
        coordinator = lakelog_process(
            "coordinator", "coordinator", tmp_path / "c", coordinator_port, tmp_path,
            "--set", "coordinator.tablet-server.heartbeat-timeout=2s",
        ).start()
        processes.append(coordinator)
        tablets = {}
        for server_id in (1, 2):
            tablets[server_id] = lakelog_process(
                f"tablet-{server_id}", "tablet-server", tmp_path / f"t{server_id}", free_port(), tmp_path,
                "--coordinator", f"127.0.0.1:{coordinator_port}", "--server-id", str(server_id),
                "--set", "tablet-server.heartbeat.interval=200ms",
                "--set", f"remote.data.dir=s3://{bucket}/remote",
                "--set", f"remote.fs.s3.endpoint=http://127.0.0.1:{s3_port}",
                "--set", f"remote.fs.s3.region={REGION}",
                "--set", "log.segment.max-bytes=64kb",
                "--set", "remote.log.task-interval=200ms",
                "--set", "remote.log.stall-warning=2s",
                "--set", "remote.log.manifest-check-interval=500ms",
                "--set", "remote.fs.s3.request-timeout=30",
                "--set", f"metrics.port={metrics_ports[server_id]}",
            ).start()
            processes.append(tablets[server_id])
            wait_until(lambda: f"tablet server {server_id} registered" in coordinator.log_path.read_text(), f"tablet server {server_id} registered")
        yield Cluster(tmp_path, s3, coordinator, tablets, f"127.0.0.1:{coordinator_port}", bucket, metrics_ports)
    finally:
        for process in reversed(processes):
            process.stop()


@dataclass
class Producer:
    """Appends rows with increasing ids, ``ROWS_PER_APPEND`` at a time, until stopped; records
    what was acknowledged and when each bucket last was."""

    table: lakelog.Table
    sent: int = 0
    acknowledged: int = 0
    acks: list[tuple[int, int, int]] = field(default_factory=list)
    last_ack_at: dict[int, float] = field(default_factory=dict)
    errors: list[BaseException] = field(default_factory=list)
    retried_batches: int = 0
    retried_requests: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def on_ack(self, ack: lakelog.AppendAck) -> None:
        with self._lock:
            self.acks.append((ack.bucket, ack.base_offset, ack.record_count))
            self.acknowledged += ack.record_count
            self.last_ack_at[ack.bucket] = time.monotonic()

    def run(self) -> None:
        try:
            with self.table.new_append().create_writer(on_ack=self.on_ack) as writer:
                while not self._stop.is_set():
                    ids = list(range(self.sent, self.sent + ROWS_PER_APPEND))
                    rows = pa.record_batch(
                        [pa.array(ids, pa.int64()), pa.array([f"n{i}" for i in ids]), pa.array([i * 0.5 for i in ids])],
                        schema=ORDERS_SCHEMA,
                    )
                    writer.append_arrow(rows, bucket=(self.sent // ROWS_PER_APPEND) % BUCKETS)
                    self.sent += ROWS_PER_APPEND
                    time.sleep(0.005)
                writer.flush()
                self.retried_batches = writer.delivery_stats.retried_batches
                self.retried_requests = writer.delivery_stats.retried_requests
        except BaseException as error:  # the test asserts there was none
            self.errors.append(error)

    def stop(self) -> None:
        self._stop.set()

    def acked_since(self, moment: float, buckets: set[int]) -> bool:
        with self._lock:
            return all(self.last_ack_at.get(bucket, 0) > moment for bucket in buckets)


@dataclass
class Consumer:
    """Polls every bucket from the beginning until stopped; keeps (bucket, offset, id) of each record."""

    table: lakelog.Table
    records: list[tuple[int, int, int]] = field(default_factory=list)
    poll_errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with self.table.new_scan().project(["id"]).create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            while not self._stop.is_set():
                try:
                    batch = scanner.poll_arrow(timeout_ms=200)
                except LakelogError as error:
                    self.poll_errors.append(f"{type(error).__name__}: {error}")
                    time.sleep(0.2)
                    continue
                self.records.extend(
                    zip(batch.column("__bucket").to_pylist(), batch.column("__offset").to_pylist(), batch.column("id").to_pylist())
                )

    def stop(self) -> None:
        self._stop.set()


def leaders_of(conn: lakelog.Connection, path: lakelog.TablePath) -> dict[int, int]:
    return {bucket: info.leader for bucket, info in conn.admin.describe_buckets(path).items()}


def remote_end(conn: lakelog.Connection, path: lakelog.TablePath) -> int:
    return sum(max(info.remote_log_end_offset, 0) for info in conn.admin.describe_buckets(path).values())


def test_acknowledged_records_are_read_exactly_once_through_tablet_coordinator_and_storage_faults(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="lakelog.client")
    figures: dict[str, Any] = {}
    with lakelog.connect(cluster.coordinator_address) as conn:
        path = lakelog.TablePath("shop", "chaos")
        conn.admin.create_database("shop", ignore_if_exists=True)
        conn.admin.create_table(path, lakelog.TableDescriptor(ORDERS_SCHEMA, BUCKETS))
        table = conn.get_table(path)
        leaders = leaders_of(conn, path)
        assert set(leaders.values()) == {1, 2}
        producer, consumer = Producer(table), Consumer(table)
        threads = [threading.Thread(target=producer.run, name="producer"), threading.Thread(target=consumer.run, name="consumer")]
        for thread in threads:
            thread.start()
        try:
            wait_until(lambda: producer.acknowledged >= 2000, "a first 2000 records acknowledged")

            # 1. kill -9 of tablet server 1, restarted 2 s later.
            victim = cluster.tablets[1]
            victim.signal(signal.SIGKILL)
            time.sleep(2)
            figures["tablet server restart until listening (s)"] = cluster.restart(victim)
            back = time.monotonic()
            its_buckets = {bucket for bucket, leader in leaders.items() if leader == 1}
            wait_until(lambda: producer.acked_since(back, its_buckets), "writes to the restarted server's buckets acknowledged")
            figures["tablet server: restart to first ack on its buckets (s)"] = time.monotonic() - back

            # 2. kill -9 of the coordinator, restarted 2 s later on the same port.
            cluster.coordinator.signal(signal.SIGKILL)
            acked_while_down = producer.acknowledged
            time.sleep(2)
            figures["records acknowledged while the coordinator was down"] = producer.acknowledged - acked_while_down
            figures["coordinator restart until listening (s)"] = cluster.restart(cluster.coordinator)
            back = time.monotonic()
            wait_until(lambda: _answers(conn, path), "the coordinator answering describe")
            wait_until(lambda: producer.acked_since(back, set(range(BUCKETS))), "writes acknowledged after the coordinator restart")
            figures["coordinator: restart to describe answering and every bucket acked (s)"] = time.monotonic() - back

            # 3. S3 frozen for 5 s, then thawed.
            uploaded = remote_end(conn, path)
            cluster.s3.signal(signal.SIGSTOP)
            acked_while_frozen = producer.acknowledged
            wait_until(lambda: all("stalled: no answer from remote storage" in cluster.tablet_log(i) for i in (1, 2)), "both servers saying the upload stalled", 30)
            time.sleep(3)
            backlog = {i: metric_sum(port, "lakelog_remote_upload_backlog_bytes") for i, port in cluster.metrics_ports.items()}
            backlog_age = {i: metric_sum(port, "lakelog_remote_upload_backlog_age_seconds") for i, port in cluster.metrics_ports.items()}
            figures["upload backlog while S3 was frozen (bytes, per server)"] = backlog
            figures["records acknowledged while S3 was frozen"] = producer.acknowledged - acked_while_frozen
            assert all(size > 0 for size in backlog.values()) and all(age > 0 for age in backlog_age.values())
            cluster.s3.signal(signal.SIGCONT)
            back = time.monotonic()
            for server_id in (1, 2):
                wait_until(lambda: "moves again after a stall" in cluster.tablet_log(server_id), f"server {server_id} saying uploads move again")
            figures["S3: thaw to both servers' uploads moving again (s)"] = time.monotonic() - back
            wait_until(lambda: remote_end(conn, path) > max(uploaded, 0), "remote log end past where the freeze held it")
            wait_until(lambda: sum(metric_sum(port, "lakelog_remote_upload_backlog_age_seconds") for port in cluster.metrics_ports.values()) < 5, "the backlog drained", 90)
            figures["S3: thaw to upload backlog younger than 5 s (s)"] = time.monotonic() - back
            for server_id in (1, 2):
                stalls = cluster.tablet_log(server_id).count("stalled: no answer from remote storage")
                assert stalls == cluster.tablet_log(server_id).count("moves again after a stall") == 1, "one stall, said once"
                uploads = [line for line in cluster.tablet_log(server_id).splitlines() if "uploaded shop.chaos" in line]
                assert uploads and all(" KiB as " in line or " MiB as " in line for line in uploads), uploads[:3]

            time.sleep(1)
        finally:
            producer.stop()
            threads[0].join(180)
        assert producer.errors == [], f"the producer saw {producer.errors!r}"
        assert producer.acknowledged == producer.sent
        wait_until(lambda: len(consumer.records) >= producer.acknowledged, "the consumer read every acknowledged record", 120)
        consumer.stop()
        threads[1].join(30)

        by_bucket: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for bucket, offset, record_id in consumer.records:
            by_bucket[bucket].append((offset, record_id))
        ids = [record_id for _, _, record_id in consumer.records]
        assert len(ids) == len(set(ids)), "a record was read twice"
        assert sorted(ids) == list(range(producer.sent)), "a record acknowledged was not read, or one never sent was"
        for bucket, rows in by_bucket.items():
            assert [offset for offset, _ in rows] == list(range(len(rows))), f"bucket {bucket} offsets not 0.. in order"
            bucket_ids = [record_id for _, record_id in rows]
            assert bucket_ids == sorted(bucket_ids), f"bucket {bucket} records out of the order they were appended"
        acked = sorted((bucket, base, count) for bucket, base, count in producer.acks)
        for bucket in range(BUCKETS):
            ranges = [(base, count) for b, base, count in acked if b == bucket]
            assert [base for base, _ in ranges] == list(itertools.accumulate([0] + [count for _, count in ranges[:-1]])), f"bucket {bucket} acks overlap or leave gaps"
        assert conn.admin.list_offsets(path, spec=lakelog.OffsetSpec.latest()) == {b: len(by_bucket[b]) for b in range(BUCKETS)}

        figures.update(
            {
                "records sent": producer.sent,
                "records acknowledged": producer.acknowledged,
                "produce requests resent": producer.retried_requests,
                "batches resent": producer.retried_batches,
                "records read": len(consumer.records),
                "consumer poll errors": len(consumer.poll_errors),
                "resent batches the servers had appended already (answered, not appended)": sum(
                    cluster.tablet_log(i).count("answered without appending") for i in (1, 2)
                ),
            }
        )
        retry_lines = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage() or "works again" in r.getMessage()]
        figures["client retry log lines (start + end of each bucket's outage)"] = len(retry_lines)
        assert len(retry_lines) <= 2 * 2 * BUCKETS * 3, retry_lines  # produce and fetch, per bucket, per fault at most
        print("\nchaos figures:")
        for name, value in figures.items():
            print(f"  {name}: {value:.2f}" if isinstance(value, float) else f"  {name}: {value}")
        assert producer.retried_batches > 0, "no fault reached the writer: the test did not test retries"


def _answers(conn: lakelog.Connection, path: lakelog.TablePath) -> bool:
    try:
        conn.admin.describe_buckets(path)
        return True
    except LakelogError:
        return False


def test_a_remote_tier_whose_objects_vanished_is_found_logged_described_and_counted(cluster: Cluster) -> None:
    """The in-memory S3 restarted: every uploaded segment and manifest is gone. Each server finds out
    by its periodic manifest check, says so once at ERROR, describe_buckets and the metrics show it,
    and the local segments (now the only copy) are kept."""
    with lakelog.connect(cluster.coordinator_address) as conn:
        path = lakelog.TablePath("shop", "vanishing")
        conn.admin.create_database("shop", ignore_if_exists=True)
        conn.admin.create_table(path, lakelog.TableDescriptor(ORDERS_SCHEMA, BUCKETS))
        table = conn.get_table(path)
        with table.new_append().create_writer() as writer:
            for start in range(0, 40000, 1000):
                ids = list(range(start, start + 1000))
                writer.append_arrow(
                    pa.record_batch([pa.array(ids, pa.int64()), pa.array([f"n{i}" for i in ids]), pa.array([i * 0.5 for i in ids])], schema=ORDERS_SCHEMA),
                    bucket=(start // 1000) % BUCKETS,
                )
        wait_until(lambda: all(info.remote_log_end_offset > 0 for info in conn.admin.describe_buckets(path).values()), "every bucket uploaded")
        assert all(info.remote_error == "" for info in conn.admin.describe_buckets(path).values())

        cluster.s3.signal(signal.SIGKILL)
        cluster.restart(cluster.s3)
        create_bucket(int(cluster.s3.args[-1]))  # the bucket name differs: the old one is gone with its objects
        wait_until(lambda: all(info.remote_error for info in conn.admin.describe_buckets(path).values()), "every bucket's lost remote tier described")
        described = conn.admin.describe_buckets(path)
        assert all("lakelog repair remote shop.vanishing" in info.remote_error for info in described.values()), described
        assert sum(metric_sum(port, "lakelog_remote_manifest_errors") for port in cluster.metrics_ports.values()) == BUCKETS
        time.sleep(1)  # more manifest checks run: each finding is still said once
        errors = [line for i in (1, 2) for line in cluster.tablet_log(i).splitlines() if " ERROR " in line and "shop.vanishing bucket " in line]
        assert sorted(line.split("shop.vanishing bucket ")[1][0] for line in errors) == [str(b) for b in range(BUCKETS)], errors
        offsets = conn.admin.list_offsets(path, spec=lakelog.OffsetSpec.latest())
        assert sum(offsets.values()) == 40000
        assert all(info.local_log_start_offset == described[bucket].local_log_start_offset for bucket, info in conn.admin.describe_buckets(path).items())
