"""Failover of replicated buckets on a real cluster (a coordinator and three tablet servers, each
its own process; factor 3, acks=all): the leader killed with SIGKILL again and again under a
producer and a reader, a wiped disk, a leader paused with SIGSTOP until it is replaced.

Checked every time: every acknowledged record is read back at the offset it was acknowledged
with (lost 0), no offset holds two records and no record two offsets (reused 0), and every record
the concurrent reader saw is still there at its offset (taken back 0). CI runs 20 kills;
``LAKELOG_REPLICA_KILL_LOOPS=100`` runs more. The figures and the failover times (kill to the
first acknowledged produce and to the first new record read) are printed for the closing note.
"""

from __future__ import annotations

import os
import signal
import statistics
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Iterator

import pytest

import lakelog
from lakelog.record.batch import encode_batch
from tests.harness.raw_client import RawClient
from tests.harness.replica_cluster import ReplicaCluster
from tests.harness.tables import create_table, order_rows, scan_all
from tests.harness.waiting import wait_until

KILLS = int(os.environ.get("LAKELOG_REPLICA_KILL_LOOPS", "20"))
FACTOR_3 = {"table.replication.factor": "3"}
CLIENT = {"client.request-timeout": "5s", "client.writer.delivery-timeout": "120s", "client.writer.linger": "5ms"}


class Producer(threading.Thread):
    """Appends rows with increasing ids to bucket 0 until stopped; keeps every acknowledgement."""

    def __init__(self, cluster: ReplicaCluster, path: lakelog.TablePath, first_id: int = 0) -> None:
        super().__init__(name="producer", daemon=True)
        self._cluster = cluster
        self._path = path
        self._next_id = first_id
        self._pending: list[int] = []
        self._lock = threading.Lock()
        self.stopped = threading.Event()
        self.acked: list[tuple[int, list[int]]] = []  # (base offset, ids)
        self.ack_times: list[float] = []
        self.error: BaseException | None = None

    def _on_ack(self, ack: lakelog.AppendAck) -> None:
        with self._lock:
            ids, self._pending = self._pending[: ack.record_count], self._pending[ack.record_count :]
            self.acked.append((ack.base_offset, ids))
            self.ack_times.append(time.monotonic())

    def run(self) -> None:
        try:
            with self._cluster.connect(CLIENT) as conn:
                writer = conn.get_table(self._path).new_append().create_writer(on_ack=self._on_ack)
                while not self.stopped.is_set():
                    with self._lock:
                        self._pending += range(self._next_id, self._next_id + 20)
                    writer.append_arrow(order_rows(self._next_id, 20), bucket=0)
                    self._next_id += 20
                    writer.flush()
        except BaseException as error:  # noqa: BLE001 - the test reports it
            self.error = error

    def first_ack_after(self, moment: float) -> float | None:
        with self._lock:
            return next((t for t in self.ack_times if t > moment), None)

    @property
    def acked_records(self) -> int:
        with self._lock:
            return sum(len(ids) for _, ids in self.acked)


class Reader(threading.Thread):
    """Polls bucket 0 from the beginning until stopped; keeps every record it saw, and when."""

    def __init__(self, cluster: ReplicaCluster, path: lakelog.TablePath) -> None:
        super().__init__(name="reader", daemon=True)
        self._cluster = cluster
        self._path = path
        self.stopped = threading.Event()
        self.seen: dict[int, int] = {}  # offset -> id
        self.seen_times: list[float] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self._cluster.connect(CLIENT) as conn:
                with conn.get_table(self._path).new_scan().create_log_scanner() as scanner:
                    scanner.subscribe_from_beginning()
                    while not self.stopped.is_set():
                        for record in scanner.poll(200):
                            assert self.seen.setdefault(record.offset, record.row["id"]) == record.row["id"]
                            self.seen_times.append(time.monotonic())
        except BaseException as error:  # noqa: BLE001 - the test reports it
            self.error = error


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ReplicaCluster]:
    with ReplicaCluster(tmp_path) as cluster:
        yield cluster


def in_sync(cluster: ReplicaCluster, path: lakelog.TablePath) -> lakelog.BucketInfo | None:
    with cluster.connect() as conn:
        info = conn.admin.describe_buckets(path)[0]
    return info if info.leader_available and len(info.isr) == 3 else None


def read_log(cluster: ReplicaCluster, path: lakelog.TablePath, at_least: int) -> list[int]:
    """Bucket 0's ids in offset order; its offsets must run from 0 without a gap. A new leader shows
    what its predecessor acknowledged once its followers (or the coordinator) let its high watermark
    get there: the read waits for ``at_least`` records first."""
    with cluster.connect(CLIENT) as conn:
        (total,) = wait_until(
            lambda: (end := conn.admin.list_offsets(path)[0]) >= at_least and (end,), "the high watermark covers every acknowledgement"
        )
        with conn.get_table(path).new_scan().project(["id"]).create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            rows = scan_all(scanner, total).to_pydict()
    log = [record_id for _, record_id in sorted(zip(rows["__offset"], rows["id"]))]
    assert sorted(rows["__offset"]) == list(range(total)), "offsets run from 0 without a gap"
    return log


def acknowledged_end(producer: Producer) -> int:
    return max((base + len(ids) for base, ids in producer.acked), default=0)


def check(log: list[int], producer: Producer, reader: Reader) -> dict[str, int]:
    """The figures of the closing note; each failure count must be 0."""
    lost = sum(log[base : base + len(ids)] != ids for base, ids in producer.acked)
    reused = len(log) - len(set(log))
    taken_back = sum(offset >= len(log) or log[offset] != record_id for offset, record_id in reader.seen.items())
    return {"acknowledged": producer.acked_records, "lost": lost, "reused": reused, "taken_back": taken_back, "read": len(reader.seen)}


def start_traffic(cluster: ReplicaCluster, path: lakelog.TablePath) -> tuple[Producer, Reader]:
    producer, reader = Producer(cluster, path), Reader(cluster, path)
    producer.start()
    reader.start()
    return producer, reader


def stop_traffic(producer: Producer, reader: Reader) -> None:
    for worker in (producer, reader):
        worker.stopped.set()
        worker.join(180)
        assert not worker.is_alive(), f"{worker.name} still runs"
        assert worker.error is None, f"{worker.name} failed: {worker.error!r}"


@pytest.mark.timeout(300 + 40 * KILLS)
def test_killing_the_leader_again_and_again_loses_no_acknowledged_record(cluster: ReplicaCluster) -> None:
    with cluster.connect() as conn:
        path = create_table(conn, properties=FACTOR_3).path
    wait_until(lambda: in_sync(cluster, path), "all three in sync")
    producer, reader = start_traffic(cluster, path)
    to_ack, to_read = [], []
    try:
        for kill in range(KILLS):
            floor = producer.acked_records
            wait_until(lambda: producer.acked_records > floor + 100 and len(reader.seen) > 0, f"kill {kill}: produce and read before the kill")
            leader = wait_until(lambda: in_sync(cluster, path), f"kill {kill}: all three in sync").leader
            killed_at = time.monotonic()
            cluster.tablets[leader].signal(signal.SIGKILL)
            seen_before = len(reader.seen_times)
            acked_at = wait_until(lambda: producer.first_ack_after(killed_at), f"kill {kill}: an acknowledgement after the leader died", 60)
            read_at = wait_until(lambda: next((t for t in reader.seen_times[seen_before:] if t > killed_at), None), f"kill {kill}: a read", 60)
            to_ack.append(acked_at - killed_at)
            to_read.append(read_at - killed_at)
            cluster.start_tablet(leader)
        stop_traffic(producer, reader)
        figures = check(read_log(cluster, path, acknowledged_end(producer)), producer, reader)
    finally:
        producer.stopped.set()
        reader.stopped.set()
    print(
        f"\n{KILLS} leader kills: {figures['acknowledged']:,} records acknowledged, lost {figures['lost']},"
        f" offsets reused {figures['reused']}, read {figures['read']:,} and taken back {figures['taken_back']};"
        f" kill -9 to first acknowledged produce p50 {statistics.median(to_ack):.2f} s max {max(to_ack):.2f} s,"
        f" to first record read p50 {statistics.median(to_read):.2f} s max {max(to_read):.2f} s"
    )
    assert (figures["lost"], figures["reused"], figures["taken_back"]) == (0, 0, 0), figures


def test_a_wiped_server_copies_its_buckets_back_and_then_alone_serves_everything_acknowledged(cluster: ReplicaCluster) -> None:
    with cluster.connect() as conn:
        path = create_table(conn, properties=FACTOR_3).path
    producer, reader = start_traffic(cluster, path)
    try:
        wait_until(lambda: producer.acked_records > 500, "records acknowledged")
        leader = wait_until(lambda: in_sync(cluster, path), "all in sync").leader
        wiped = next(s for s in (1, 2, 3) if s != leader)
        cluster.tablets[wiped].stop()
        cluster.wipe(wiped)
        cluster.start_tablet(wiped)
        floor = producer.acked_records
        wait_until(lambda: producer.acked_records > floor + 500, "more records acknowledged")
        wait_until(lambda: in_sync(cluster, path), "the wiped server back in the ISR", 120)
        stop_traffic(producer, reader)
    finally:
        producer.stopped.set()
        reader.stopped.set()
    for other in (1, 2, 3):
        if other != wiped:
            cluster.tablets[other].signal(signal.SIGKILL)
    assert wait_until(lambda: (i := in_sync_or_alone(cluster, path)) and i.leader == wiped, "the rebuilt server leads")
    figures = check(read_log(cluster, path, acknowledged_end(producer)), producer, reader)
    assert (figures["lost"], figures["reused"], figures["taken_back"]) == (0, 0, 0), figures


def test_a_server_rebuilt_from_its_leaders_local_log_knows_a_writer_whose_batches_left_it(tmp_path: Path) -> None:
    """A writer's batch uploaded and deleted locally, a follower's disk wiped: it copies from the
    leader's local log start, below which the writer's batch lies. Once it leads alone, the writer
    resending that batch (its answer lost) gets its original offsets; nothing is appended twice."""
    small_segments = {"log.segment.max-bytes": "16kb", "remote.log.task-interval": "200ms"}
    with ReplicaCluster(tmp_path, tablet_settings=small_segments) as cluster, cluster.connect() as conn:
        table = create_table(conn, properties={**FACTOR_3, "table.log.tiered.local-segments": "1"})
        leader = wait_until(lambda: in_sync(cluster, table.path), "all in sync").leader
        with closing(RawClient(cluster.address)) as to_coordinator, closing(RawClient(cluster.tablet_address(leader))) as to_leader:
            identity = to_coordinator.init_writer()
            original = encode_batch(order_rows(0, 3), 1, writer=(identity.writer_id, 0, 0))
            assert to_leader.produce(table.info.table_id, [original], identity.token).error_code == 0
        writer = table.new_append().create_writer()
        for start in range(3, 3000, 100):
            writer.append_arrow(order_rows(start, 100))
            writer.flush()
        wait_until(lambda: (i := in_sync(cluster, table.path)) and i.local_log_start_offset > 3, "the writer's batch left the local logs")
        wiped = next(s for s in (1, 2, 3) if s != leader)
        cluster.tablets[wiped].stop()
        cluster.wipe(wiped)
        cluster.start_tablet(wiped)
        wait_until(lambda: in_sync(cluster, table.path), "the wiped server back in the ISR", 120)
        for other in (1, 2, 3):
            if other != wiped:
                cluster.tablets[other].signal(signal.SIGKILL)
        wait_until(lambda: (i := in_sync_or_alone(cluster, table.path)) and i.leader == wiped, "the rebuilt server leads")
        with closing(RawClient(cluster.tablet_address(wiped))) as to_rebuilt:
            resent = to_rebuilt.produce(table.info.table_id, [original], identity.token)
        assert (resent.error_code, resent.base_offset) == (0, 0), "the resent batch was appended again"
        assert conn.admin.list_offsets(table.path, spec=lakelog.OffsetSpec.latest()) == {0: 3003}


def in_sync_or_alone(cluster: ReplicaCluster, path: lakelog.TablePath) -> lakelog.BucketInfo | None:
    with cluster.connect() as conn:
        info = conn.admin.describe_buckets(path)[0]
    return info if info.leader_available else None


def test_a_paused_leader_is_replaced_acknowledges_nothing_after_and_its_unreplicated_tail_is_cut(tmp_path: Path) -> None:
    # Followers paused for a second must not count as down: the coordinator waits 4 s for a heartbeat.
    with ReplicaCluster(tmp_path, coordinator_settings={"coordinator.tablet-server.heartbeat-timeout": "4s"}) as cluster:
        paused_leader_is_replaced(cluster)


def answers_settled(cluster: ReplicaCluster, server_id: int) -> bool:
    """No fetch answered by ``server_id`` for 0.6 s: three times ``log.replica.fetch-wait``, the
    longest a follower's fetch is parked."""
    before = cluster.metric(server_id, "lakelog_fetch_answers_total")
    time.sleep(0.6)
    return cluster.metric(server_id, "lakelog_fetch_answers_total") == before


def paused_leader_is_replaced(cluster: ReplicaCluster) -> None:
    with cluster.connect() as conn:
        path = create_table(conn, properties=FACTOR_3).path
        writer = conn.get_table(path).new_append().create_writer()
        writer.append_arrow(order_rows(0, 100))
        writer.flush()
    leader = wait_until(lambda: in_sync(cluster, path), "all in sync").leader
    followers = [s for s in (1, 2, 3) if s != leader]
    for follower in followers:  # the next append reaches the leader alone
        cluster.tablets[follower].signal(signal.SIGSTOP)
    # The followers' fetches parked on the leader are answered (empty) before it appends: one still
    # parked would carry the append to a stopped follower's socket, and the tail would not be the
    # leader's alone. On a loaded machine the leader may read a last request late, so wait until it
    # answers no more rather than for a fixed time.
    wait_until(lambda: answers_settled(cluster, leader), "the stopped followers' last fetches answered")
    producer = Producer(cluster, path, first_id=1_000_000)
    producer.start()
    tail_bytes = cluster.log_bytes(leader)
    wait_until(lambda: cluster.log_bytes(leader) > tail_bytes, "the leader appended what no follower holds")
    cluster.tablets[leader].signal(signal.SIGSTOP)
    for follower in followers:
        cluster.tablets[follower].signal(signal.SIGCONT)
    try:
        replaced = wait_until(lambda: (i := in_sync_or_alone(cluster, path)) and i.leader != leader and i, "a new leader", 60)
        floor = producer.acked_records
        wait_until(lambda: producer.acked_records > floor + 200, "the new leader acknowledges")
        cluster.tablets[leader].signal(signal.SIGCONT)
        wait_until(lambda: in_sync(cluster, path), "the old leader back in the ISR as a follower", 60)
        producer.stopped.set()
        producer.join(180)
        assert producer.error is None
    finally:
        producer.stopped.set()
        cluster.tablets[leader].signal(signal.SIGCONT)
    log = read_log(cluster, path, acknowledged_end(producer))
    assert log[:100] == list(range(100))
    assert check(log, producer, Reader(cluster, path))["lost"] == 0
    assert replaced.leader_epoch > 0
    took_over = f"leading {path} bucket 0 in leader epoch {replaced.leader_epoch} from offset 100 "
    assert took_over in cluster.tablets[replaced.leader].log_path.read_text(), "the new leader's epoch starts where the followers stopped"
    assert "truncated from offset" in cluster.tablets[leader].log_path.read_text(), "the replaced leader cut its unreplicated tail"


def test_a_new_leader_carries_on_uploading_from_the_remote_manifest(tmp_path: Path) -> None:
    small_segments = {"log.segment.max-bytes": "16kb", "remote.log.task-interval": "200ms"}
    cluster = ReplicaCluster(tmp_path, tablet_settings=small_segments).start()
    try:
        with cluster.connect() as conn:
            path = create_table(conn, properties={**FACTOR_3, "table.log.tiered.local-segments": "1"}).path
            writer = conn.get_table(path).new_append().create_writer()
            for start in range(0, 3000, 100):
                writer.append_arrow(order_rows(start, 100))
                writer.flush()
            first = wait_until(lambda: (i := in_sync(cluster, path)) and i.remote_log_end_offset > 0 and i, "segments uploaded")
            cluster.tablets[first.leader].signal(signal.SIGKILL)
            for start in range(3000, 6000, 100):
                writer.append_arrow(order_rows(start, 100))
                writer.flush()
            # A pass uploads first and trims the local log after: both are waited for.
            after = wait_until(
                lambda: (i := in_sync_or_alone(cluster, path))
                and i.leader != first.leader
                and i.remote_log_end_offset > 3000
                and i.local_log_start_offset > first.remote_log_end_offset
                and i,
                "the new leader uploads past what the old one did and trims its local log",
            )
            assert after.remote_log_start_offset == 0, "the new leader carried on the old one's manifest, which starts at offset 0"
            with conn.get_table(path).new_scan().create_log_scanner() as scanner:
                scanner.subscribe_from_beginning()
                rows = scan_all(scanner, 6000)
            assert sorted(zip(rows.column("__offset").to_pylist(), rows.column("id").to_pylist())) == [(i, i) for i in range(6000)]
        for server_id in (1, 2, 3):
            if server_id != first.leader:  # the follower too deleted what remote storage holds
                wait_until(lambda: min(int(p.stem) for p in cluster.tablet_dir(server_id).glob("tablet-server/log/*/*/*.log")) > 0, f"server {server_id} trims its copy")
    finally:
        cluster.stop()
