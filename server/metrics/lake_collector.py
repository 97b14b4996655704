"""The lake's numbers per lake-enabled table, read from its Iceberg metadata at scrape time:
data files, how many are small, snapshots kept, and when a compaction last committed. A growing
small-file share or snapshot count is what says a table needs ``lakelog lake compact`` or
``expire`` (or ``table.datalake.auto-compaction``)."""

from __future__ import annotations

import logging
from typing import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from lakelog.errors import LakelogError
from lakelog.server.coordinator.coordinator import Coordinator

log = logging.getLogger(__name__)


class LakeTableCollector(Collector):
    def __init__(self, coordinator: Coordinator) -> None:
        self._coordinator = coordinator

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families = [
            GaugeMetricFamily("lakelog_lake_data_files", "Data files of the lake table's current snapshot.", labels=["table"]),
            GaugeMetricFamily(
                "lakelog_lake_small_file_share",
                "Share (0..1) of those data files below 75% of table.datalake.target-file-size: what compaction merges.",
                labels=["table"],
            ),
            GaugeMetricFamily("lakelog_lake_snapshots", "Snapshots the lake table keeps (lakelog lake expire removes old ones).", labels=["table"]),
            GaugeMetricFamily(
                "lakelog_lake_last_compaction_timestamp_seconds",
                "When the newest compaction snapshot the lake table keeps was committed (absent: none).",
                labels=["table"],
            ),
        ]
        files, share, snapshots, compaction = families
        for info in self._coordinator.tables():
            if not info.lake_enabled:
                continue
            try:
                stats = self._coordinator.lake_table_stats(info)
            except LakelogError as error:
                log.warning("%s: the lake's numbers are left out of this scrape: %s", info.path, error)
                continue
            if stats is None:
                continue
            table = [str(info.path)]
            files.add_metric(table, stats.data_files)
            share.add_metric(table, stats.small_file_share)
            snapshots.add_metric(table, stats.snapshots)
            if stats.last_compaction_ms is not None:
                compaction.add_metric(table, stats.last_compaction_ms / 1000)
        yield from families
