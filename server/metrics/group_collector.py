"""``lakelog_group_lag{group, table}``: per consumer group and table, the records its members have
yet to commit (high watermark minus committed offset, summed over the buckets whose leader
answered the scrape; a bucket without a commit counts from offset 0)."""

from __future__ import annotations

from typing import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from lakelog.server.coordinator.groups.group_coordinator import GroupCoordinator


class GroupLagCollector(Collector):
    def __init__(self, groups: GroupCoordinator) -> None:
        self._groups = groups

    def collect(self) -> Iterator[GaugeMetricFamily]:
        lag = GaugeMetricFamily(
            "lakelog_group_lag", "Records a consumer group has yet to commit in a table (high watermark minus committed offset).", labels=["group", "table"]
        )
        for summary in self._groups.list_groups():
            per_table: dict[str, int] = {}
            for state in self._groups.describe(summary.group_id).buckets:
                if state.lag is not None:
                    per_table[str(state.table)] = per_table.get(str(state.table), 0) + state.lag
            for table, value in sorted(per_table.items()):
                lag.add_metric([summary.group_id, table], value)
        yield lag
