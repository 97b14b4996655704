"""The tiering job's Prometheus metrics: rounds (how long, how many failed), what they tiered per
table, and how far each table's lake lags, served by ``lakelog tier --metrics-port``.

A registry per job, as each server has its own (tests run several in one process). The lag is
computed at scrape time from the newest record each table's lake holds, so it keeps growing while
rounds fail or stall, which is what an alert must see.
"""

from __future__ import annotations

import time
from typing import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from lakelog.metadata import LakeSnapshot, TablePath
from lakelog.version import __version__

# From a round with nothing to do (a second) to one tiering a large backlog.
ROUND_SECONDS_BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)


class TieringMetrics:
    """What one tiering job counts; :attr:`registry` is what its endpoint serves."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        Info("lakelog_build", "The lakelog version this tiering job runs.", registry=registry).info({"version": __version__})
        self._rounds = Counter("lakelog_tiering_rounds", "Tiering rounds run, by outcome (ok, or failed: the whole round).", ["outcome"], registry=registry)
        self._round_seconds = Histogram(
            "lakelog_tiering_round_duration_seconds", "Time a tiering round took, failed ones included.",
            buckets=ROUND_SECONDS_BUCKETS, registry=registry,
        )
        self._last_round = Gauge(
            "lakelog_tiering_last_round_timestamp_seconds", "When the last round ended (whatever its outcome).", registry=registry
        )
        self._records = Counter("lakelog_tiering_records", "Records tiered into the lake.", ["table"], registry=registry)
        self._bytes = Counter("lakelog_tiering_bytes", "Parquet bytes written into the lake.", ["table"], registry=registry)
        self._snapshots = Counter("lakelog_tiering_snapshots", "Lake snapshots committed.", ["table"], registry=registry)
        self._failures = Counter(
            "lakelog_tiering_table_failures", "Rounds in which a table could not be tiered (the next round retries it).", ["table"],
            registry=registry,
        )
        self._lake_max_ms: dict[str, int] = {}
        registry.register(_LagCollector(self._lake_max_ms))

    def round_finished(self, seconds: float, ok: bool) -> None:
        self._rounds.labels("ok" if ok else "failed").inc()
        self._round_seconds.observe(seconds)
        self._last_round.set_to_current_time()

    def table_tiered(self, path: TablePath, records: int, size: int, lake: LakeSnapshot | None, committed: bool) -> None:
        table = str(path)
        self._records.labels(table).inc(records)
        self._bytes.labels(table).inc(size)
        if committed:
            self._snapshots.labels(table).inc()
        newest = max((o.log_max_timestamp for o in lake.bucket_offsets.values()), default=-1) if lake is not None else -1
        if newest >= 0:
            self._lake_max_ms[table] = max(newest, self._lake_max_ms.get(table, -1))

    def table_failed(self, path: TablePath) -> None:
        self._failures.labels(str(path)).inc()


class _LagCollector(Collector):
    def __init__(self, lake_max_ms: dict[str, int]) -> None:
        self._lake_max_ms = lake_max_ms

    def collect(self) -> Iterator[GaugeMetricFamily]:
        lag = GaugeMetricFamily(
            "lakelog_tiering_lake_lag_seconds",
            "Now minus the commit timestamp of the newest record the table's lake holds (as of this job's last round).",
            labels=["table"],
        )
        now_ms = time.time() * 1000
        for table, newest in sorted(self._lake_max_ms.items()):
            lag.add_metric([table], max(now_ms - newest, 0) / 1000)
        yield lag
