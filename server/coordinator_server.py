"""The coordinator role: the SQLite metadata store, the lake configuration, tablet server liveness,
the coordinator logic behind its service and the status page."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from lakelog.config import Configuration
from lakelog.lake_config import LakeConfig
from lakelog.cluster_state import ServerNode
from lakelog.server.coordinator.coordinator import Coordinator
from lakelog.server.coordinator.groups.group_coordinator import GroupCoordinator
from lakelog.server.coordinator.groups.group_offset_store import GroupOffsetStore
from lakelog.server.coordinator.groups.group_tables import GroupTables
from lakelog.server.coordinator.lake_tables import LakeTables
from lakelog.server.coordinator.metadata_store import MetadataStore
from lakelog.server.metrics.group_collector import GroupLagCollector
from lakelog.server.metrics.lake_collector import LakeTableCollector
from lakelog.metrics_endpoint import WsgiApp
from lakelog.server.metrics.server_metrics import ServerMetrics
from lakelog.server.open_file_limit import buckets_within, open_file_limit
from lakelog.server.rpc.auth_interceptor import CallerName
from lakelog.server.rpc.coordinator_service import CoordinatorService
from lakelog.server.rpc.tablet_client import GrpcTabletNotifier
from lakelog.server.status.cluster_status import ClusterStatus
from lakelog.server.status.status_page import StatusPage

log = logging.getLogger(__name__)

# How often the coordinator looks for silent tablet servers, at most: a down server is reported
# within the heartbeat timeout plus this.
LIVENESS_CHECK_S = 1.0


def max_buckets_per_server(conf: Configuration) -> int:
    """``coordinator.max-buckets-per-tablet-server``, or when 0 what this process's open-file limit
    holds (raised at start, see :class:`ServerProcess`; the tablet servers of a cluster are
    expected to run with the limit of their coordinator, else the key is set)."""
    configured = conf.get("coordinator.max-buckets-per-tablet-server")
    cap = configured or buckets_within(open_file_limit())
    log.info("at most %d buckets per tablet server%s", cap, "" if configured else " (from the open-file limit)")
    return cap


class CoordinatorRole:
    def __init__(self, conf: Configuration, data_dir: Path, cluster_secret: str | None) -> None:
        self.store = MetadataStore(data_dir / "coordinator" / "metadata.db")
        self.tablets = GrpcTabletNotifier(conf, cluster_secret)
        lake = LakeTables(LakeConfig.from_configuration(conf, data_dir))
        timeout_ms = conf.get("coordinator.tablet-server.heartbeat-timeout")
        self.coordinator = Coordinator(
            self.store,
            self.tablets,
            lake,
            timeout_ms,
            max_buckets_per_server(conf),
            conf.get("max.partition.num"),
            conf.get("coordinator.auto-partition.check-interval"),
            conf.get("default.replication.factor"),
        )
        self.coordinator.auto_partitioner.start()
        self.group_offsets = GroupOffsetStore(data_dir / "coordinator" / "group_offsets.db")
        tables = GroupTables(self.coordinator, self.tablets)
        self.groups = GroupCoordinator(self.group_offsets, tables.buckets, tables.high_watermarks, tables.path)
        self._check_interval_s = min(LIVENESS_CHECK_S, timeout_ms / 4000)
        self._status: ClusterStatus | None = None
        self._stop = threading.Event()
        self._checker = threading.Thread(target=self._check_liveness, name="liveness-check", daemon=True)
        self._checker.start()

    def _check_liveness(self) -> None:
        while not self._stop.wait(self._check_interval_s):
            self.coordinator.check_liveness()
            self.groups.expire()

    def service(self, node: ServerNode, metrics: ServerMetrics, caller: CallerName) -> CoordinatorService:
        metrics.registry.register(_LivenessCollector(self.coordinator))
        metrics.registry.register(LakeTableCollector(self.coordinator))
        metrics.registry.register(GroupLagCollector(self.groups))
        return CoordinatorService(self.coordinator, self.groups, node, metrics, caller)

    def status_pages(self) -> dict[str, WsgiApp]:
        """The status page's routes; sampling the lake lag for its line starts here, so a
        coordinator without the page does not sample."""
        self._status = ClusterStatus(self.coordinator, self.tablets, self.groups).start()
        return StatusPage(self._status).routes()

    def close(self) -> None:
        if self._status is not None:
            self._status.close()
        self._stop.set()
        self._checker.join()
        self.coordinator.auto_partitioner.close()
        self.coordinator.close()
        self.tablets.close()
        self.group_offsets.close()
        self.store.close()


class _LivenessCollector(Collector):
    """``lakelog_tablet_server_up{server_id}``: 1 while a tablet server heartbeats, 0 once it is down;
    ``lakelog_offline_buckets``: buckets whose leader is down (no live in-sync replica could take over)."""

    def __init__(self, coordinator: Coordinator) -> None:
        self._coordinator = coordinator

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("lakelog_tablet_server_up", "1 while a tablet server heartbeats the coordinator, 0 once it is down.", labels=["server_id"])
        for server_id, alive in self._coordinator.liveness.states().items():
            up.add_metric([str(server_id)], 1 if alive else 0)
        yield up
        yield GaugeMetricFamily(
            "lakelog_offline_buckets", "Buckets whose leader is down: they take no writes and serve no reads until it or an in-sync replica is back.",
            value=self._coordinator.offline_buckets(),
        )
