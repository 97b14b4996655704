"""What the coordinator's status page shows, as one JSON-ready document.

Plain Python over the coordinator and its channels to the tablet servers, no HTTP, so it is tested
and reused without a browser. Tables, leaders, lake snapshots and tiering jobs are the
coordinator's own; the per-bucket ranges and high watermarks live on the tablet servers and are
asked for on each call (DescribeLogBuckets, one call per table and leader), so the page shows what
a client would see now. A tablet server that is down or does not answer leaves its buckets marked
unavailable instead of failing the page.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from lakelog.errors import LakelogError, LakeSnapshotNotExistError, TableNotExistError
from lakelog.cluster_state import ServerNode
from lakelog.metadata import BucketInfo, LakeSnapshot, TableInfo
from lakelog.server.coordinator.bucket_describer import BucketDescriber, describe_assignment
from lakelog.server.coordinator.coordinator import Coordinator
from lakelog.server.coordinator.groups.group_coordinator import GroupCoordinator
from lakelog.server.log.log_tablet import wall_clock_ms
from lakelog.server.status.lake_lag_history import LakeLagHistory
from lakelog.tier_spans import tier_spans

log = logging.getLogger(__name__)

# 360 samples make the hour's line: fine enough to see a tiering round's saw-tooth.
LAG_SAMPLE_INTERVAL_MS = 10_000


class ClusterStatus:
    """:meth:`snapshot` is the page's data; :meth:`start` samples the lake lags into
    :attr:`history` every ``sample_interval_ms`` until :meth:`close`."""

    def __init__(
        self,
        coordinator: Coordinator,
        tablets: BucketDescriber,
        groups: GroupCoordinator | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        sample_interval_ms: int = LAG_SAMPLE_INTERVAL_MS,
    ) -> None:
        self._coordinator = coordinator
        self._tablets = tablets
        self._groups = groups
        self._clock = clock
        self._interval_s = sample_interval_ms / 1000
        self.history = LakeLagHistory(sample_interval_ms)
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample_loop, name="lake-lag-sampler", daemon=True)

    def start(self) -> "ClusterStatus":
        self._sampler.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._sampler.is_alive():
            self._sampler.join()

    def _sample_loop(self) -> None:
        while True:
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - a failed sample leaves a gap in the line, nothing else
                log.exception("sampling the lake lag failed")
            if self._stop.wait(self._interval_s):
                return

    def sample(self) -> None:
        """Record every lake-enabled table's lag now."""
        now = self._clock()
        self.history.record(now, {str(info.path): _lag(self._lake_snapshot(info), now) for info in self._lake_tables()})

    def _lake_tables(self) -> list[TableInfo]:
        return [info for info in self._coordinator.tables() if info.lake_enabled]

    def _lake_snapshot(self, info: TableInfo) -> LakeSnapshot | None:
        try:
            return self._coordinator.lake_snapshot(info.table_id)
        except (LakeSnapshotNotExistError, TableNotExistError):  # nothing tiered yet, or dropped just now
            return None

    def snapshot(self) -> dict[str, Any]:
        """Tables (with per-bucket tier spans and, when lake-enabled, the lake's lag and its last
        hour), tiering jobs (newest heartbeat first), tablet servers and consumer groups, as of ``now_ms``."""
        now = self._clock()
        nodes = {node.server_id: node for node in self._coordinator.tablet_servers()}
        up = self._coordinator.liveness.states()
        reachable = {server_id: node for server_id, node in nodes.items() if up.get(server_id, False)}
        return {
            "now_ms": now,
            "tables": [self._table(info, reachable, now) for info in self._coordinator.tables()],
            "tiering_jobs": [
                {
                    "job_id": job.job_id,
                    "tables": [str(path) for path in job.tables],
                    "last_barrier_ms": job.last_barrier,
                    "last_heartbeat_ms": job.last_heartbeat_ms,
                }
                for job in reversed(self._coordinator.tiering_jobs())
            ],
            "tablet_servers": [
                {"server_id": server_id, "address": node.address, "up": up.get(server_id, False)} for server_id, node in nodes.items()
            ],
            "groups": self._group_rows(),
        }

    def _group_rows(self) -> list[dict[str, Any]]:
        """Consumer groups with their members and, per bucket, its reader, committed offset and lag."""
        if self._groups is None:
            return []
        rows = []
        for summary in self._groups.list_groups():
            described = self._groups.describe(summary.group_id)
            rows.append(
                {
                    "group": summary.group_id,
                    "members": len(described.members),
                    "lag": described.lag,
                    "buckets": [
                        {
                            "table": str(state.table),
                            "partition_id": state.bucket.partition_id or None,
                            "bucket": state.bucket.bucket,
                            "member": state.member_id,
                            "committed": state.committed,
                            "high_watermark": state.high_watermark,
                            "lag": state.lag,
                        }
                        for state in described.buckets
                    ],
                }
            )
        return rows

    def _table(self, info: TableInfo, reachable: dict[int, ServerNode], now: int) -> dict[str, Any]:
        """A partitioned table's buckets are its partitions': listed per partition (a lake-only
        partition with none, its log is gone), each with its buckets' tier spans."""
        assignments = self._coordinator.assignments(info)
        described = [describe_assignment(self._tablets, assignment, reachable) for assignment in assignments]
        table: dict[str, Any] = {
            "table": str(info.path),
            "table_id": info.table_id,
            "lake_enabled": info.lake_enabled,
            "buckets": [_bucket(bucket, found) for bucket, found in described[0].items()],
        }
        if info.partitioned:
            live = [
                {
                    "partition_id": assignment.info.partition_id,
                    "partition_name": assignment.info.partition_name,
                    "lake_only": False,
                    "buckets": [_bucket(bucket, found) for bucket, found in buckets.items()],
                }
                for assignment, buckets in zip(assignments[1:], described[1:])
            ]
            gone = [
                {"partition_id": p.partition_id, "partition_name": p.partition_name, "lake_only": True, "buckets": []}
                for p in self._coordinator.list_partitions_of(info)
                if p.lake_only
            ]
            table["partitions"] = sorted(live + gone, key=lambda p: p["partition_id"])
        if info.lake_enabled:
            snapshot = self._lake_snapshot(info)
            lag = _lag(snapshot, now)
            table["lake"] = {
                "snapshot_id": snapshot.snapshot_id if snapshot else None,
                "lag_ms": lag,
                "offsets_behind": sum(
                    b.high_watermark - max(b.lake_log_end_offset, 0) for buckets in described for b in buckets.values() if b.leader_available
                ),
                "lag_history": [*self.history.samples(str(info.path), now), (now, lag)],
                "files": self._lake_files(info),
            }
        return table

    def _lake_files(self, info: TableInfo) -> dict[str, Any] | None:
        """The lake table's data files, small-file share, snapshots and last compaction (None when
        they cannot be read now: the rest of the page is still worth showing)."""
        try:
            stats = self._coordinator.lake_table_stats(info)
        except LakelogError as error:
            log.warning("%s: the status page shows no lake numbers: %s", info.path, error)
            return None
        if stats is None:
            return None
        return {
            "data_files": stats.data_files,
            "small_files": stats.small_files,
            "small_file_share": stats.small_file_share,
            "snapshots": stats.snapshots,
            "last_compaction_ms": stats.last_compaction_ms,
        }


def _lag(snapshot: LakeSnapshot | None, now: int) -> int | None:
    """Now minus the lake's max timestamp (docs/contract.md, "Tiering, consistent cuts and cursors"); ``None`` while the lake holds nothing."""
    newest = max((offsets.log_max_timestamp for offsets in snapshot.bucket_offsets.values()), default=-1) if snapshot else -1
    return now - newest if newest >= 0 else None


def _bucket(bucket: int, info: BucketInfo) -> dict[str, Any]:
    """A bucket's leader, replicas and ISR, high watermark and, per tier, its offsets and where its bar lies in percent."""
    tiers: dict[str, Any] = {}
    for tier, span in tier_spans(info).items():
        if span is None:
            tiers[tier] = None
            continue
        left, right = span.scaled(info.high_watermark)
        tiers[tier] = {"start": span.start, "end": span.end, "left_pct": left * 100, "width_pct": (right - left) * 100}
    return {
        "bucket": bucket,
        "leader": info.leader,
        "available": info.leader_available,
        "high_watermark": info.high_watermark if info.leader_available else None,
        "replicas": list(info.replicas),
        "isr": list(info.isr),
        "leader_epoch": info.leader_epoch,
        "tiers": tiers,
    }
