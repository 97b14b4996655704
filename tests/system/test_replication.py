"""Replicated buckets on a real cluster: a coordinator and three tablet servers, each its own
process (tests/harness/replica_cluster.py)."""

from __future__ import annotations

import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pytest

import lakelog
from tests.harness.replica_cluster import ReplicaCluster
from tests.harness.tables import create_table, order_rows, scan_all
from tests.harness.waiting import wait_until

FACTOR_3 = {"table.replication.factor": "3"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ReplicaCluster]:
    with ReplicaCluster(tmp_path) as cluster:
        yield cluster


def test_factor_3_places_copies_on_three_servers_with_leaders_spread_and_describe_shows_them(cluster: ReplicaCluster) -> None:
    with cluster.connect() as conn:
        table = create_table(conn, buckets=6, properties=FACTOR_3)
        described = conn.admin.describe_buckets(table.path)
        assert all(sorted(info.replicas) == [1, 2, 3] for info in described.values())
        assert all(info.leader == info.replicas[0] and info.leader in info.isr for info in described.values())
        assert Counter(info.leader for info in described.values()) == {1: 2, 2: 2, 3: 2}
        plain = create_table(conn, name="plain", buckets=3)
        assert {b: (info.replicas, info.isr) for b, info in conn.admin.describe_buckets(plain.path).items()} == {
            b: ((info.leader,), (info.leader,)) for b, info in conn.admin.describe_buckets(plain.path).items()
        }


def test_a_factor_above_the_live_servers_is_refused(cluster: ReplicaCluster) -> None:
    with cluster.connect() as conn:
        with pytest.raises(lakelog.InvalidReplicationFactorError, match="replication factor 4 needs 4 live tablet servers, 3 are live"):
            create_table(conn, properties={"table.replication.factor": "4"})
        with pytest.raises(lakelog.InvalidTableError, match="table.replication.factor='0'"):
            create_table(conn, properties={"table.replication.factor": "0"})
        assert conn.admin.list_tables("shop") == []


def append(table: lakelog.Table, start: int, count: int) -> None:
    writer = table.new_append().create_writer()
    writer.append_arrow(order_rows(start, count))
    writer.flush()


def fully_in_sync(conn: lakelog.Connection, path: lakelog.TablePath) -> dict[int, lakelog.BucketInfo] | None:
    """The buckets, once every one's ISR holds all its replicas."""
    described = conn.admin.describe_buckets(path)
    return described if all(info.leader_available and len(info.isr) == len(info.replicas) for info in described.values()) else None


def test_followers_copy_the_leaders_log_and_readers_see_what_every_isr_member_holds(cluster: ReplicaCluster) -> None:
    with cluster.connect() as conn:
        table = create_table(conn, buckets=3, properties=FACTOR_3)
        writer = table.new_append().create_writer()
        for start in range(0, 3000, 300):
            writer.append_arrow(order_rows(start, 300))
        writer.flush()
        described = wait_until(lambda: fully_in_sync(conn, table.path), "every bucket's ISR holds all three replicas")
        assert sum(info.high_watermark for info in described.values()) == 3000
        scanner = table.new_scan().create_log_scanner()
        scanner.subscribe_from_beginning()
        assert sorted(scan_all(scanner, 3000).column("id").to_pylist()) == list(range(3000))
    for server_id in (1, 2, 3):
        copies = list(cluster.tablet_dir(server_id).glob("tablet-server/log/*/*/*.log"))
        assert len(copies) == 3 and all(path.stat().st_size > 0 for path in copies), f"server {server_id} holds a copy of every bucket"


def test_a_paused_follower_leaves_the_isr_after_the_lag_time_and_rejoins_after_sigcont(tmp_path: Path) -> None:
    # The coordinator would drop a silent server too: its timeout is long here, so the leader's lag rule acts.
    cluster = ReplicaCluster(tmp_path, tablet_settings={"log.replica.max-lag-time": "2s"}, coordinator_settings={"coordinator.tablet-server.heartbeat-timeout": "60s"})
    cluster.start()
    try:
        with cluster.connect() as conn:
            table = create_table(conn, properties=FACTOR_3)
            append(table, 0, 10)
            leader = wait_until(lambda: fully_in_sync(conn, table.path), "all in sync")[0].leader
            follower = next(s for s in (1, 2, 3) if s != leader)
            cluster.tablets[follower].signal(signal.SIGSTOP)
            acked = threading.Event()
            threading.Thread(target=lambda: (append(table, 10, 10), acked.set()), daemon=True).start()
            # Once the ISR shrinks the high watermark moves on before the writer's answer arrives:
            # only reads made while the paused follower was still in the ISR count.
            seen_while_in_isr = set()
            while not acked.wait(0.05):
                offset = conn.admin.list_offsets(table.path)[0]
                if follower in conn.admin.describe_buckets(table.path)[0].isr:
                    seen_while_in_isr.add(offset)
            assert seen_while_in_isr == {10}, "readers never see past what every ISR member holds"
            after = conn.admin.describe_buckets(table.path)[0]
            assert follower not in after.isr and len(after.isr) == 2 and after.high_watermark == 20
            assert cluster.metric(leader, "lakelog_under_replicated_buckets") == 1
            assert cluster.metric(leader, "lakelog_isr_shrinks_total") == 1
            cluster.tablets[follower].signal(signal.SIGCONT)
            rejoined = wait_until(lambda: fully_in_sync(conn, table.path), "the follower back in the ISR")
            assert rejoined[0].high_watermark == 20 and rejoined[0].leader == leader
            assert cluster.metric(leader, "lakelog_under_replicated_buckets") == 0
            assert cluster.metric(leader, "lakelog_isr_expands_total") == 1
    finally:
        cluster.stop()


def test_acks_all_is_refused_with_fewer_in_sync_replicas_than_the_minimum_and_acks_1_is_not(cluster: ReplicaCluster) -> None:
    with cluster.connect() as conn:
        table = create_table(conn, properties={**FACTOR_3, "table.log.replica.min-in-sync-replicas": "3"})
        append(table, 0, 10)
        leader = wait_until(lambda: fully_in_sync(conn, table.path), "all in sync")[0].leader
        follower = next(s for s in (1, 2, 3) if s != leader)
        cluster.tablets[follower].signal(signal.SIGKILL)
        wait_until(lambda: len(conn.admin.describe_buckets(table.path)[0].isr) == 2, "the dead follower out of the ISR")
        assert cluster.metric(0, "lakelog_offline_buckets") == 0, "a dead follower leaves no bucket offline"
    with cluster.connect({"client.writer.delivery-timeout": "1s"}) as conn:
        with pytest.raises(lakelog.DeliveryTimeoutError, match=r"NotEnoughReplicasError|in-sync replicas \[.*\] are fewer than min-in-sync-replicas 3"):
            append(conn.get_table(table.path), 10, 5)
        assert conn.admin.list_offsets(table.path)[0] == 10, "nothing was appended"
    with cluster.connect({"client.writer.acks": "1"}) as conn:
        append(conn.get_table(table.path), 10, 5)
        wait_until(lambda: conn.admin.list_offsets(table.path)[0] == 15, "the followers copy what the leader acknowledged alone")


def test_a_leader_that_returns_and_catches_up_leads_its_buckets_again(cluster: ReplicaCluster) -> None:
    with cluster.connect() as conn:
        table = create_table(conn, buckets=3, properties=FACTOR_3)
        append(table, 0, 30)
        placed = wait_until(lambda: fully_in_sync(conn, table.path), "all in sync")
        assert all(info.leader == info.replicas[0] for info in placed.values())
        victim = placed[0].leader
        cluster.tablets[victim].signal(signal.SIGKILL)
        others = [s for s in (1, 2, 3) if s != victim]
        moved = wait_until(lambda: (d := conn.admin.describe_buckets(table.path)) and d[0].leader_available and d[0].leader != victim and d, "a new leader")
        assert moved[0].leader_epoch > placed[0].leader_epoch and victim not in moved[0].isr
        append(table, 30, 30)
        for other in others:  # every copy gone: the bucket's leader is down and nobody can take over
            cluster.tablets[other].signal(signal.SIGSTOP)
        wait_until(lambda: cluster.metric(0, "lakelog_offline_buckets") == 3, "all three buckets offline")
        for other in others:
            cluster.tablets[other].signal(signal.SIGCONT)
        wait_until(lambda: cluster.metric(0, "lakelog_offline_buckets") == 0, "the buckets back")
        cluster.start_tablet(victim)
        back = wait_until(lambda: (d := fully_in_sync(conn, table.path)) and d[0].leader == victim and d, "the preferred leader back")
        assert {b: info.leader for b, info in back.items()} == {b: info.leader for b, info in placed.items()}
        assert sum(info.high_watermark for info in back.values()) == 60


def test_a_partitioned_tables_partitions_are_replicated_like_a_table(cluster: ReplicaCluster) -> None:
    schema = pa.schema([("dt", pa.string()), ("id", pa.int64())])
    path = lakelog.TablePath("shop", "events")
    with cluster.connect() as conn:
        conn.admin.create_database("shop", ignore_if_exists=True)
        conn.admin.create_table(path, lakelog.TableDescriptor(schema, 2, FACTOR_3, partition_keys=["dt"]))
        writer = conn.get_table(path).new_append().create_writer()
        writer.append_arrow(pa.table({"dt": ["2026-11-27"] * 100, "id": list(range(100))}))
        writer.flush()

        def partition_in_sync() -> dict[int, lakelog.BucketInfo] | None:
            described = conn.admin.describe_buckets(path, partition_name="2026-11-27")
            return described if all(len(info.isr) == 3 for info in described.values()) else None

        described = wait_until(partition_in_sync, "the partition's buckets on three servers, in sync")
        assert all(sorted(info.replicas) == [1, 2, 3] for info in described.values())
        assert sum(info.high_watermark for info in described.values()) == 100


def test_a_leader_restarted_on_another_port_is_followed_there(cluster: ReplicaCluster) -> None:
    with cluster.connect() as conn:
        table = create_table(conn, properties=FACTOR_3)
        append(table, 0, 10)
        victim = wait_until(lambda: fully_in_sync(conn, table.path), "all in sync")[0].leader
        cluster.tablets[victim].signal(signal.SIGKILL)
        wait_until(lambda: (d := conn.admin.describe_buckets(table.path)) and d[0].leader_available and d[0].leader != victim, "a new leader")
        cluster.move_tablet(victim)
        cluster.start_tablet(victim)
        wait_until(lambda: (d := fully_in_sync(conn, table.path)) and d[0].leader == victim, "the preferred leader back, on its new port")
        append(table, 10, 10)
    # Followers still fetching from the old port would never copy what it appends now.
    wait_until(lambda: len({cluster.log_bytes(server_id) for server_id in (1, 2, 3)}) == 1, "every copy holds the same batches")


def test_acks_0_is_delivered_once_sent_even_to_a_paused_leader_and_a_dead_one_fails_a_flush(tmp_path: Path) -> None:
    """Fire and forget, as Kafka's acks=0; not under a barrier hold (it never learns the commit
    timestamps the hold is released after)."""
    with ReplicaCluster(tmp_path, servers=(1,)) as cluster:
        with cluster.connect() as conn:
            path = create_table(conn, buckets=1).path
        with cluster.connect({"client.writer.acks": "0", "client.request-timeout": "5s"}) as conn:
            hold = conn.open_barrier_hold()
            with pytest.raises(lakelog.errors.InvalidConfigError, match="client.writer.acks is 0"):
                conn.get_table(path).new_append().create_writer(hold=hold)
            hold.close()
            reports: list[lakelog.AppendAck] = []
            writer = conn.get_table(path).new_append().create_writer(on_ack=reports.append)
            cluster.tablets[1].signal(signal.SIGSTOP)
            try:
                writer.append_arrow(order_rows(0, 50))
                writer.flush()  # returns with the leader stopped: nothing waits for its answer
                assert [(r.base_offset, r.record_count, r.commit_timestamp) for r in reports] == [(-1, 50, -1)]
            finally:
                cluster.tablets[1].signal(signal.SIGCONT)
            for start in range(50, 200, 50):
                writer.append_arrow(order_rows(start, 50))
                writer.flush()
            with conn.get_table(path).new_scan().create_log_scanner() as scanner:
                scanner.subscribe_from_beginning()
                rows = scan_all(scanner, 200)
            assert rows.column("id").to_pylist() == list(range(200)), "every batch appended once, in order"
            cluster.tablets[1].signal(signal.SIGKILL)

            def flush_fails() -> lakelog.LakelogError | None:
                try:
                    writer.append_arrow(order_rows(0, 1))
                    writer.flush()
                except lakelog.LakelogError as error:
                    return error
                return None

            failure = wait_until(flush_fails, "a flush raising the lost connection")
            assert "127.0.0.1" in str(failure), f"the error names the server: {failure}"
