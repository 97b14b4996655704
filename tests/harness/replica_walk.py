"""The random walk on replicated buckets: a coordinator and three tablet servers, each its own OS
process (:class:`~tests.harness.replica_cluster.ReplicaCluster`), one table of replication factor 3
written with ``acks=all``, under the same oracle and readers as :class:`~tests.harness.walk.Walk`.

Steps: produce; kill -9 a replica and restart it; wipe a replica's disk and restart it; pause a
replica with SIGSTOP and resume it with SIGCONT. Leaders are spread, so the server hit leads one
bucket and follows the others: each fault is a failover and a lost follower at once. Each fault
lasts across a produce, so the failover happens under load. A fault starts only once every
bucket's ISR holds its three replicas: the contract keeps what was acknowledged while one ISR
member survives, and one fault at a time always leaves two.

After every step the checks of :class:`Walk`: ``list_offsets`` (latest, earliest, by timestamp)
against the oracle, a reader from a random offset or timestamp, and the long-lived reader that
must see every bucket's log exactly once, in order. A new leader's high watermark reaches what its
predecessor acknowledged once its followers fetch again, so the latest offsets are awaited up to
the oracle's (and must never pass it) before they are compared.
"""

from __future__ import annotations

import random
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import lakelog
from tests.harness.tables import ORDERS_SCHEMA
from tests.harness.waiting import wait_until
from tests.harness.replica_cluster import ReplicaCluster
from tests.harness.walk import BUCKETS, PATH, Walk

SERVERS = (1, 2, 3)
# A paused leader is replaced once the coordinator misses its heartbeats (the harness's 2 s); a
# writer's request to it ends after the request timeout, and the writer resends it to the new leader.
CLIENT_SETTINGS = {"client.request-timeout": "5s", "client.writer.delivery-timeout": "120s"}
TABLET_SETTINGS = {"log.segment.max-bytes": "48kb"}
IN_SYNC_S = 120.0

STEP_WEIGHTS = {
    "produce": 6,
    "kill_replica": 1,
    "wipe_replica": 1,
    "pause_replica": 1,
}


def replica_cluster(root: Path) -> ReplicaCluster:
    """The cluster a replicated walk runs on (``root``: its directory)."""
    return ReplicaCluster(root, SERVERS, TABLET_SETTINGS, client_settings=CLIENT_SETTINGS)


@dataclass
class ReplicaWalk(Walk):
    cluster: ReplicaCluster  # type: ignore[assignment]
    step_weights: ClassVar[dict[str, float]] = STEP_WEIGHTS
    replay_test: ClassVar[str] = "tests/system/test_random_walk.py -k replicated"
    replay_variables: ClassVar[tuple[str, str]] = ("LAKELOG_REPLICA_WALK_SEEDS", "LAKELOG_REPLICA_WALK_STEPS")

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    @property
    def outage(self) -> bool:
        return False

    def _create_tables(self, admin: lakelog.Admin) -> None:
        admin.create_database(PATH.database, ignore_if_exists=True)
        admin.create_table(PATH, lakelog.TableDescriptor(ORDERS_SCHEMA, BUCKETS, {"table.replication.factor": str(len(SERVERS))}))
        self._wait_in_sync()

    def _close(self) -> None:
        for process in self.cluster.tablets.values():
            if process.running:
                process.signal(signal.SIGCONT)
        if self.follower is not None:
            self.follower.close()
        if self.conn is not None:
            self.conn.close()
        self.cluster.stop()

    def _check(self, number: int) -> None:
        self._check_log(f"seed {self.seed} step {number}")

    def _check_offsets(self, where: str) -> None:
        assert self.conn is not None
        expected = {b: self.oracle.high_watermark(b) for b in range(BUCKETS)}

        def caught_up() -> bool:
            assert self.conn is not None
            latest = self.conn.admin.list_offsets(PATH, spec=lakelog.OffsetSpec.latest())
            assert all(latest[b] <= expected[b] for b in range(BUCKETS)), f"{where}: latest {latest} past the oracle's {expected}"
            return latest == expected

        wait_until(caught_up, f"{where}: the high watermarks reach the oracle's {expected}", IN_SYNC_S)
        super()._check_offsets(where)

    # the replica steps

    def _wait_in_sync(self) -> None:
        assert self.conn is not None
        admin = self.conn.admin
        wait_until(
            lambda: all(info.leader_available and len(info.isr) == len(SERVERS) for info in admin.describe_buckets(PATH).values()),
            "every bucket's three replicas in sync",
            IN_SYNC_S,
        )

    def _victim(self) -> tuple[int, str]:
        """A server, once every replica is in sync, and the buckets it leads."""
        self._wait_in_sync()
        assert self.conn is not None
        server = self.rng.choice(SERVERS)
        led = sorted(b for b, info in self.conn.admin.describe_buckets(PATH).items() if info.leader == server)
        return server, f"leads buckets {led}" if led else "leads nothing"

    def _step_kill_replica(self) -> str:
        return self._killed_and_restarted(wipe=False)

    def _step_wipe_replica(self) -> str:
        return self._killed_and_restarted(wipe=True)

    def _killed_and_restarted(self, wipe: bool) -> str:
        """kill -9 a server (``wipe``: and empty its disk), produce, restart it."""
        server, role = self._victim()
        self.cluster.tablets[server].signal(signal.SIGKILL)
        if wipe:
            self.cluster.wipe(server)
        produced = self._step_produce()
        self.cluster.start_tablet(server)
        return f"{'wipe' if wipe else 'kill -9'} server {server} ({role}), {produced}, restart it{' empty' if wipe else ''}"

    def _step_pause_replica(self) -> str:
        server, role = self._victim()
        self.cluster.tablets[server].signal(signal.SIGSTOP)
        try:
            produced = self._step_produce()
        finally:
            self.cluster.tablets[server].signal(signal.SIGCONT)
        return f"pause server {server} ({role}), {produced}, resume it"
