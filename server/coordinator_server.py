"""The coordinator role: the SQLite metadata store, the lake configuration and the coordinator logic
behind its service."""

from __future__ import annotations

from pathlib import Path

from lakelog.config import Configuration
from lakelog.lake.lake_config import LakeConfig
from lakelog.metadata import ServerNode
from lakelog.server.coordinator.coordinator import Coordinator
from lakelog.server.coordinator.lake_tables import LakeTables
from lakelog.server.coordinator.metadata_store import MetadataStore
from lakelog.server.metrics.server_metrics import ServerMetrics
from lakelog.server.rpc.coordinator_service import CoordinatorService
from lakelog.server.rpc.tablet_client import GrpcTabletNotifier


class CoordinatorRole:
    def __init__(self, conf: Configuration, data_dir: Path, cluster_secret: str | None) -> None:
        self.store = MetadataStore(data_dir / "coordinator" / "metadata.db")
        self._notifier = GrpcTabletNotifier(conf, cluster_secret)
        self.coordinator = Coordinator(self.store, self._notifier, LakeTables(LakeConfig.from_configuration(conf, data_dir)))

    def service(self, node: ServerNode, metrics: ServerMetrics) -> CoordinatorService:
        return CoordinatorService(self.coordinator, node, metrics)

    def close(self) -> None:
        self._notifier.close()
        self.store.close()
