"""Gauges of a tablet server's tiers and replicas, computed when Prometheus scrapes.

State, not events: the barrier holds, segments and bytes per tier, and how far the remote tier and the lake trail the
log, per table (summed over the buckets this server leads; a bucket label would multiply series by
the bucket count). Computing them at scrape time costs the hot path nothing, and reads only memory:
the local segments, the remote manifests as last seen and the lake ranges the coordinator notified.
"""

from __future__ import annotations

from typing import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from lakelog.server.log.log_manager import LogManager
from lakelog.server.remote.remote_log_manager import RemoteLogManager
from lakelog.server.replica.replica_manager import ReplicaManager


class TabletStateCollector(Collector):
    def __init__(self, replicas: ReplicaManager, logs: LogManager, remote: RemoteLogManager) -> None:
        self._replicas = replicas
        self._logs = logs
        self._remote = remote

    def collect(self) -> Iterator[GaugeMetricFamily]:
        segments = GaugeMetricFamily(
            "lakelog_segments", "Log segments per tier (local counts the active one).", labels=["table", "tier"]
        )
        sizes = GaugeMetricFamily("lakelog_segments_size_bytes", "Bytes of the log segments per tier.", labels=["table", "tier"])
        upload_lag = GaugeMetricFamily(
            "lakelog_remote_upload_lag_records",
            "Records on local disk not yet in remote storage, the active segment included.",
            labels=["table"],
        )
        lake_lag = GaugeMetricFamily(
            "lakelog_lake_lag_records",
            "Records of a lake-enabled table not yet in a committed lake snapshot (high watermark minus lake end).",
            labels=["table"],
        )
        manifest_errors = GaugeMetricFamily(
            "lakelog_remote_manifest_errors",
            "Buckets whose remote manifest is missing, damaged or older than this server wrote, or whose remote "
            "objects vanished: their remote range is neither read nor deleted until `lakelog repair remote`.",
            labels=["table"],
        )
        backlog_bytes = GaugeMetricFamily(
            "lakelog_remote_upload_backlog_bytes", "Bytes of rolled local segments not yet uploaded to remote storage.", labels=["table"]
        )
        backlog_age = GaugeMetricFamily(
            "lakelog_remote_upload_backlog_age_seconds",
            "How long the oldest rolled segment not yet uploaded has waited (since its last record); 0 without backlog.",
            labels=["table"],
        )
        quarantined = GaugeMetricFamily(
            "lakelog_quarantined_segments",
            "Damaged rolled segments set aside at recovery (named at ERROR): their offsets come from remote storage or fail.",
            labels=["table"],
        )
        upload_blocked = GaugeMetricFamily(
            "lakelog_remote_upload_blocked_buckets",
            "Buckets whose uploads stop at a damaged segment that was never uploaded (named at ERROR): no gap in remote storage.",
            labels=["table"],
        )
        fenced = GaugeMetricFamily(
            "lakelog_fenced_buckets",
            "Buckets refusing writes because their log lost acknowledged records, until `lakelog repair local`.",
            labels=["table"],
        )
        for info, buckets in self._replicas.led_tables():
            local_segments = local_bytes = remote_segments = remote_bytes = not_uploaded = not_in_lake = 0
            holes = fences = 0
            for bucket in buckets:
                tablet = self._logs.get(info.physical_id, bucket)
                if tablet is None:  # dropped since led_tables()
                    continue
                local = tablet.segments
                manifest = self._remote.known_manifest(info.physical_id, bucket)
                high_watermark = tablet.high_watermark
                local_segments += len(local)
                holes += len(tablet.quarantined)
                fences += tablet.fence is not None
                local_bytes += sum(segment.size for segment in local)
                remote_segments += len(manifest.segments)
                remote_bytes += sum(segment.size_in_bytes for segment in manifest.segments)
                # Local segments are deleted only once uploaded: below the local start is uploaded too.
                not_uploaded += max(high_watermark - max(manifest.end_offset, tablet.log_start_offset), 0)
                not_in_lake += max(high_watermark - (self._replicas.lake.end_offset(info.physical_id, bucket) or 0), 0)
            table = info.label
            segments.add_metric([table, "local"], local_segments)
            segments.add_metric([table, "remote"], remote_segments)
            sizes.add_metric([table, "local"], local_bytes)
            sizes.add_metric([table, "remote"], remote_bytes)
            upload_lag.add_metric([table], not_uploaded)
            manifest_errors.add_metric([table], self._remote.manifest_errors(info.physical_id))
            backlog = self._remote.upload_backlog(info.physical_id)
            backlog_bytes.add_metric([table], backlog.size_bytes)
            backlog_age.add_metric([table], backlog.age_s)
            quarantined.add_metric([table], holes)
            fenced.add_metric([table], fences)
            upload_blocked.add_metric([table], self._remote.uploads_blocked(info.physical_id))
            if info.lake_enabled:
                lake_lag.add_metric([table], not_in_lake)
        yield from (segments, sizes, upload_lag, lake_lag, manifest_errors, backlog_bytes, backlog_age, quarantined, fenced, upload_blocked)
        replication = self._replicas.replication
        yield GaugeMetricFamily(
            "lakelog_under_replicated_buckets",
            "Buckets led here whose in-sync replicas are fewer than their replicas (a follower is down or behind).",
            value=replication.under_replicated(),
        )
        yield CounterMetricFamily("lakelog_isr_shrinks", "Times a bucket led here dropped a follower from its ISR.", value=replication.isr_shrinks)
        yield CounterMetricFamily("lakelog_isr_expands", "Times a bucket led here took a caught-up follower into its ISR.", value=replication.isr_expands)
        yield GaugeMetricFamily(
            "lakelog_barrier_holds", "Barrier holds remembered: open ones, and closed ones the barrier has not passed.", value=len(self._replicas.holds)
        )
        yield GaugeMetricFamily(
            "lakelog_barrier_safe_time_lag_seconds",
            "The clock minus GetServerTime: how far unflushed appends and barrier holds keep tiering barriers back.",
            value=(self._logs.clock() - self._replicas.server_time()) / 1000,
        )
