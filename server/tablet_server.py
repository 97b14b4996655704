"""The tablet server role: bucket logs, their remote tier, the replica manager, registration with
the coordinator."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Callable

from lakelog.config import Configuration
from lakelog.errors import InvalidConfigError, LakelogError
from lakelog.cluster_state import ServerNode, TableAssignment
from lakelog.server.log.log_manager import LogManager
from lakelog.server.log.log_tablet import LogConfig, wall_clock_ms
from lakelog.server.metrics.server_metrics import ServerMetrics
from lakelog.server.remote.remote_log_manager import RemoteLogManager
from lakelog.server.replica.replica_manager import ReplicaManager
from lakelog.security.writer_tokens import WriterTokens
from lakelog.server.rpc.answer_budget import AnswerBudget
from lakelog.server.replica.replica_fetcher import FetcherPool
from lakelog.server.replica.replication import Replication, ReplicationConfig
from lakelog.server.rpc.auth_interceptor import CallerName
from lakelog.server.rpc.coordinator_client import CoordinatorClient
from lakelog.server.rpc.leader_link import GrpcLeaderLink
from lakelog.server.rpc.replica_stream_link import ReplicaStreamLink
from lakelog.server.rpc.tablet_service import TabletService

log = logging.getLogger(__name__)

REGISTER_DEADLINE_S = 60.0
# How often a leader looks for followers to drop from or add to its buckets' ISRs.
ISR_CHECK_S = 0.25
# How long the tablet servers' addresses learnt from the coordinator are trusted.
NODES_MAX_AGE_S = 1.0


class TabletServerRole:
    def __init__(
        self, conf: Configuration, data_dir: Path, cluster_secret: str | None, clock: Callable[[], int] = wall_clock_ms
    ) -> None:
        """``clock`` stamps commit timestamps (tests skew it, like Kafka's ``Time``)."""
        self._conf = conf
        self._cluster_secret = cluster_secret
        self._dir = data_dir / "tablet-server"
        self.server_id = self._server_id(conf.get("tablet-server.id"))
        self._coordinator: CoordinatorClient | None = None
        self.logs = LogManager(
            self._dir / "log", LogConfig.from_configuration(conf), on_high_watermark=self._on_high_watermark, clock=clock
        )
        self.remote = RemoteLogManager.from_configuration(conf, data_dir)
        config = ReplicationConfig.from_configuration(conf)
        self._leader_link = ReplicaStreamLink(GrpcLeaderLink(conf, cluster_secret), cluster_secret)
        self._nodes: dict[int, ServerNode] = {}
        self._nodes_asked = float("-inf")
        fetchers = FetcherPool(self.server_id, self._leader_link, self._node, config.fetch_wait_ms, lambda bucket, offset, writers: bucket.tablet.restart_at(offset, writers))
        self.replicas = ReplicaManager(
            self.server_id, self.logs, self._resolve, self.remote, conf.get("server.fetch.max-parked-polls"),
            Replication(self.server_id, config, fetchers),
        )
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick_loop, name="log-ticker", daemon=True)
        self._heartbeats = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        self._isr_changes = threading.Thread(target=self._isr_loop, name="isr-changes", daemon=True)

    def _server_id(self, configured: int) -> int:
        """Kept in the data dir (like Kafka's meta.properties) so a restart keeps its buckets."""
        meta = self._dir / "meta.json"
        if meta.exists():
            stored = int(json.loads(meta.read_text())["server_id"])
            if configured >= 0 and configured != stored:
                raise InvalidConfigError(f"data dir {self._dir} belongs to tablet server {stored}, not {configured}")
            return stored
        server_id = max(configured, 0)
        self._dir.mkdir(parents=True, exist_ok=True)
        meta.write_text(json.dumps({"server_id": server_id}))
        return server_id

    def _on_high_watermark(self, table_id: int, bucket: int) -> None:
        self.replicas.notify_high_watermark(table_id, bucket)

    def _resolve(self, table_id: int) -> TableAssignment:
        if self._coordinator is None:
            raise LakelogError("tablet server has not joined a coordinator yet")
        return self._coordinator.table_assignment(table_id)

    def _node(self, server_id: int) -> ServerNode | None:
        """A tablet server's address, asked of the coordinator when not known or last asked more than
        ``NODES_MAX_AGE_S`` ago (a restarted server may listen on another port)."""
        stale = time.monotonic() - self._nodes_asked > NODES_MAX_AGE_S
        if (server_id not in self._nodes or stale) and self._coordinator is not None:
            try:
                self._nodes = {node.server_id: node for node in self._coordinator.tablet_servers()}
                self._nodes_asked = time.monotonic()
            except LakelogError as error:
                log.warning("cannot learn the tablet servers' addresses from the coordinator: %s", error)
        return self._nodes.get(server_id)

    def service(self, metrics: ServerMetrics, caller: CallerName) -> TabletService:
        budget = AnswerBudget(self._conf.get("server.fetch.max-inflight-bytes"))
        return TabletService(self.replicas, metrics, budget, caller, self._cluster_secret)

    def join(self, node: ServerNode, coordinator_address: str) -> None:
        """Register with the coordinator (retrying while it starts) and open every bucket we lead."""
        self._coordinator = CoordinatorClient(coordinator_address, self._conf, self._cluster_secret)
        deadline = time.monotonic() + REGISTER_DEADLINE_S
        while True:
            try:
                assignments, lake_ranges, writer_key = self._coordinator.register(node)
                break
            except LakelogError as error:
                if not error.retriable or time.monotonic() > deadline:
                    raise
                log.info("coordinator %s not reachable yet (%s); retrying", coordinator_address, error)
                time.sleep(0.5)
        self.replicas.writer_tokens = WriterTokens(writer_key)
        self.replicas.lake.update(lake_ranges)
        self.replicas.become_leader(assignments)
        self.replicas.mark_ready()
        self._ticker.start()
        self._heartbeats.start()
        self._isr_changes.start()
        log.info("tablet server %d serving at %s", node.server_id, node.address)

    def _tick_loop(self) -> None:
        interval = min(self._conf.get("remote.log.task-interval"), 1000) / 1000
        while not self._stop.wait(interval):
            for task in (self.logs.tick, self.remote.tick):  # the remote one keeps its own schedule
                try:
                    task()
                except Exception:  # noqa: BLE001 - a failed tick is retried on the next one
                    log.exception("log maintenance failed")

    def _heartbeat_loop(self) -> None:
        """Tell the coordinator this server is alive. An outage is logged when it starts and when
        it ends, with how many heartbeats it swallowed, not once per heartbeat."""
        assert self._coordinator is not None
        interval = self._conf.get("tablet-server.heartbeat.interval") / 1000
        failed = 0
        while not self._stop.wait(interval):
            try:
                self._coordinator.heartbeat(self.server_id)
            except LakelogError as error:
                if not failed:
                    log.warning("heartbeat to coordinator %s failed, will keep trying: %s", self._coordinator.address, error)
                failed += 1
                continue
            if failed:
                log.info("coordinator %s answers heartbeats again after %d failed", self._coordinator.address, failed)
                failed = 0

    def _isr_loop(self) -> None:
        """Send the ISR changes this server's led buckets need to the coordinator, and apply what it accepts."""
        assert self._coordinator is not None
        while not self._stop.wait(ISR_CHECK_S):
            for change in self.replicas.isr_changes():
                try:
                    copies = self._coordinator.adjust_isr(self.server_id, change.info.physical_id, change.bucket, change.tracker.copies, change.wanted)
                except LakelogError as error:
                    log.warning("%s bucket %d: ISR change to %s refused: %s", change.info.label, change.bucket, list(change.wanted), error)
                    continue
                self.replicas.apply_isr(change, copies)

    def close(self) -> None:
        self._stop.set()
        self.remote.close()
        for thread in (self._ticker, self._heartbeats, self._isr_changes):
            if thread.is_alive():
                thread.join()
        self.replicas.replication.close()
        self._leader_link.close()
        self.logs.close_all()
        if self._coordinator is not None:
            self._coordinator.close()
