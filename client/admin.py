"""Admin: databases, tables, offsets, bucket descriptions and lake snapshots (lakelog's own
internal calls are :mod:`lakelog.client.internal_admin`'s)."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from lakelog.consumer_groups import GroupDescription, GroupSummary
from lakelog.errors import (
    DatabaseNotExistError,
    InvalidPartitionError,
    InvalidTimestampError,
    LakeError,
    LakelogError,
    LakeSnapshotNotExistError,
    NetworkError,
    PartitionNotExistError,
    RequestTimeoutError,
    TableNotExistError,
    UnknownBucketError,
)
from lakelog.lake_config import LakeConfig
from lakelog.metadata import (
    BucketInfo,
    LakeBucketKey,
    LakeBucketOffset,
    LakeSnapshot,
    OffsetSpec,
    OffsetType,
    PartitionInfo,
    SchemaInfo,
    TableChange,
    TableDescriptor,
    TableInfo,
    TablePath,
    TableTieringStatus,
    TieringJobInfo,
    partition_name,
    partition_spec,
)
from lakelog.cluster_state import ServerNode
from lakelog.client.group.group_admin import GroupAdmin
from lakelog.client.lake.lake_sources import LakeSources
from lakelog.log_source import LogSource, LookupContext
from lakelog.client.rpc.coordinator_gateway import CoordinatorGateway
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.messages import BucketRepair, ListedOffset
from lakelog.client.rpc.tablet_gateway import TabletGateway

T = TypeVar("T")

# The leader a lake-only partition's buckets are described with: none, their log is gone.
NO_LEADER = -1


class Admin:
    def __init__(
        self, coordinator: CoordinatorGateway, tablets: TabletGateway, router: LeaderRouter, lake: LakeSources | None = None
    ) -> None:
        """``lake``: where list_offsets finds a table's LogSource (None: an admin without the lake)."""
        self._coordinator = coordinator
        self._tablets = tablets
        self._router = router
        self._metadata = router.metadata
        self._lake = lake
        self.groups = GroupAdmin(coordinator, router, self)

    def _read(self, what: str, action: Callable[[], T]) -> T:
        """A coordinator lookup: safe to send again, so retried like every lookup."""
        return self._router.call(action, what, resend_safe=True)

    def _change(self, what: str, action: Callable[[], T]) -> T:
        """A coordinator change: resent only where it was surely not applied."""
        return self._router.call(action, what, resend_safe=False)

    # consumer groups (lakelog.client.group.group_admin)

    def list_groups(self) -> list[GroupSummary]:
        return self.groups.list_groups()

    def describe_group(self, name: str) -> GroupDescription:
        return self.groups.describe_group(name)

    def list_group_offsets(self, name: str, path: TablePath) -> dict[Any, int]:
        return self.groups.list_group_offsets(name, path)

    def reset_group_offsets(self, name: str, path: TablePath, spec: OffsetSpec) -> dict[Any, int]:
        return self.groups.reset_group_offsets(name, path, spec)

    # databases

    def create_database(self, name: str, ignore_if_exists: bool = False, comment: str = "") -> None:
        self._change("create database", lambda: self._coordinator.create_database(name, ignore_if_exists, comment))

    def drop_database(self, name: str, ignore_if_not_exists: bool = False, cascade: bool = False) -> None:
        self._change("drop database", lambda: self._coordinator.drop_database(name, ignore_if_not_exists, cascade))

    def list_databases(self) -> list[str]:
        return self._read("list databases", self._coordinator.list_databases)

    # tables

    def create_table(self, path: TablePath, descriptor: TableDescriptor, ignore_if_exists: bool = False) -> int:
        descriptor.validate()
        return self._change("create table", lambda: self._coordinator.create_table(path, descriptor, ignore_if_exists))

    def drop_table(self, path: TablePath, ignore_if_not_exists: bool = False) -> None:
        self._change("drop table", lambda: self._coordinator.drop_table(path, ignore_if_not_exists))
        self._metadata.forget(path)

    def database_exists(self, name: str) -> bool:
        return name in self.list_databases()

    def table_exists(self, path: TablePath) -> bool:
        try:
            self.get_table_info(path)
        except (TableNotExistError, DatabaseNotExistError):
            return False
        return True

    def list_tables(self, database: str) -> list[str]:
        return self._read("list tables", lambda: self._coordinator.list_tables(database))

    def get_table_info(self, path: TablePath) -> TableInfo:
        return self._read("get table info", lambda: self._coordinator.get_table_info(path))

    def alter_table(self, path: TablePath, changes: Sequence[TableChange], ignore_if_not_exists: bool = False) -> int:
        """Add nullable columns last and widen columns (``TableChange.add_column``,
        ``TableChange.widen_column``), all as one new schema version; its id. A change that is not
        allowed raises :class:`InvalidAlterTableError` naming the column, and nothing changes.
        Writers opened before keep writing their schema; readers read every record in the new one."""
        schema_id = self._change("alter table", lambda: self._coordinator.alter_table(path, list(changes), ignore_if_not_exists))
        self._metadata.forget(path)
        return schema_id

    def get_table_schema(self, path: TablePath, schema_id: int = 0) -> SchemaInfo:
        """Version ``schema_id`` of the table's schema (the current one by default)."""
        return self._read("get table schema", lambda: self._coordinator.get_table_schema(path, schema_id))

    # partitions

    def create_partition(self, path: TablePath, spec: Mapping[str, str], ignore_if_exists: bool = False) -> int:
        """Create the partition ``spec`` (partition key -> value) names; its id. Values are checked
        here first, so a bad one never reaches the server (:class:`InvalidPartitionError`)."""
        checked = self._checked_spec(path, spec)
        return self._change("create partition", lambda: self._coordinator.create_partition(path, checked, ignore_if_exists))

    def drop_partition(self, path: TablePath, spec: Mapping[str, str], ignore_if_not_exists: bool = False) -> None:
        """Drop a partition: its buckets' logs go from the tablet servers and remote storage (what
        the lake holds of it stays). Its id is never used again."""
        checked = self._checked_spec(path, spec)
        self._change("drop partition", lambda: self._coordinator.drop_partition(path, checked, ignore_if_not_exists))

    def _checked_spec(self, path: TablePath, spec: Mapping[str, str]) -> dict[str, str]:
        info = self._metadata.table(path)
        if not info.partitioned:
            raise InvalidPartitionError(f"table {path} is not partitioned")
        return partition_spec(info.partition_keys, partition_name(info.partition_keys, spec))

    def list_partition_infos(self, path: TablePath) -> list[PartitionInfo]:
        """Every partition of a partitioned table, oldest (smallest id) first."""
        return self._read("list partitions", lambda: self._coordinator.list_partition_infos(path))

    # offsets and buckets

    def _log_set(self, path: TablePath, partition_name: str | None, refresh: bool = False) -> tuple[TableInfo, bool]:
        """The table's info, or with ``partition_name`` that partition's (a partitioned table's
        buckets are its partitions'), and whether it is held by the lake only (its log dropped)."""
        info = self._metadata.table(path, refresh)
        if partition_name is None:
            if info.partitioned:
                raise InvalidPartitionError(f"table {path} is partitioned by {list(info.partition_keys)}: name a partition")
            return info, False
        if not info.partitioned:
            raise InvalidPartitionError(f"table {path} is not partitioned")
        found = None if refresh else self._metadata.partitions(info).get(partition_name)
        found = found or self._metadata.partitions(info, refresh=True).get(partition_name)
        if found is not None:
            return found, False
        gone = next((p for p in self.list_partition_infos(path) if p.lake_only and p.partition_name == partition_name), None)
        if gone is None:
            raise PartitionNotExistError(f"table {path} has no partition {partition_name!r}")
        return info.for_partition(gone), True

    def _per_bucket(
        self,
        path: TablePath,
        partition_name: str | None,
        log: Callable[[TableInfo], T],
        lake: Callable[[TableInfo, dict[int, LakeBucketOffset], int], T],
    ) -> T:
        """``log(info)`` asked of the table's or partition's leaders, or, for a partition held by the
        lake only (also one dropped while asked), ``lake(info, its lake range per bucket, the lake
        snapshot's id)`` (a partition dropped empty before any tiering round: empty ranges, id -1). Ids
        are cached by name: a leader that no longer knows one makes the name looked up again."""
        info, lake_only = self._log_set(path, partition_name)
        if not lake_only:
            try:
                return log(info)
            except (PartitionNotExistError, TableNotExistError):
                cached = info
                info, lake_only = self._log_set(path, partition_name, refresh=True)
                if not lake_only:
                    if info.physical_id == cached.physical_id:
                        raise
                    return log(info)  # dropped and created again under this name since it was cached
        try:
            snapshot = self.get_lake_snapshot(path)
        except LakeSnapshotNotExistError:
            snapshot = LakeSnapshot(-1)
        pid = info.partition_id
        ranges = {b: snapshot.bucket_offsets.get((pid, b), LakeBucketOffset(0, 0)) for b in range(info.buckets)}
        return lake(info, ranges, snapshot.snapshot_id)

    def list_offsets(
        self,
        path: TablePath,
        buckets: Iterable[int] | None = None,
        spec: OffsetSpec | None = None,
        partition_name: str | None = None,
    ) -> dict[int, int]:
        """Per bucket (of the partition ``partition_name`` of a partitioned table), the offset
        ``spec`` names (default: latest). With the table's LogSource the earliest offset counts the
        lake, and a timestamp the lake holds is resolved in the lake. A partition held by the lake
        only answers from the lake: its range there is all of its log."""
        chosen = spec or OffsetSpec.latest()

        def log(info: TableInfo) -> dict[int, int]:
            listed = self._log_offsets([info], buckets, chosen)[info.partition_id or 0]
            if isinstance(listed, LakelogError):
                raise listed
            return listed

        def lake(info: TableInfo, ranges: dict[int, LakeBucketOffset], snapshot_id: int) -> dict[int, int]:
            wanted = _buckets(info, buckets)
            if chosen.type != OffsetType.TIMESTAMP:
                return {b: ranges[b].log_end_offset if chosen.type == OffsetType.LATEST else ranges[b].log_start_offset for b in wanted}
            source = self._lake.log_source(info) if self._lake is not None else None
            if source is None:
                raise LakeError(f"{info.label} is held by the lake only: a timestamp lookup needs the lake (client.lake.enabled)")
            return {b: _lake_offset_or_end(source, info, b, chosen.ms, snapshot_id, ranges[b]) for b in wanted}

        return self._per_bucket(path, partition_name, log, lake)

    def list_partitions_offsets(
        self, partitions: Sequence[TableInfo], buckets: Iterable[int] | None = None, spec: OffsetSpec | None = None
    ) -> dict[int, dict[int, int] | None]:
        """:meth:`list_offsets` of each of ``partitions`` (partitions of one table that have a
        log, as the metadata lists them) in one ListOffsets per leader for all of them, not one per
        partition: per partition id, its offsets, or None when it was dropped since it was listed."""
        if not partitions:
            return {}
        offsets: dict[int, dict[int, int] | None] = {}
        for partition_id, found in self._log_offsets(partitions, buckets, spec or OffsetSpec.latest()).items():
            if isinstance(found, (PartitionNotExistError, TableNotExistError)):
                offsets[partition_id] = None
            elif isinstance(found, LakelogError):
                raise found
            else:
                offsets[partition_id] = found
        return offsets

    def _log_offsets(
        self, infos: Sequence[TableInfo], buckets: Iterable[int] | None, spec: OffsetSpec
    ) -> dict[int, dict[int, int] | LakelogError]:
        """Per partition id of ``infos`` (0 for a table's own buckets), the offsets ``spec`` names
        from their leaders, or the error one of its buckets answered. With the table's
        LogSource the earliest offset counts the lake, and a timestamp the lake holds is resolved
        there. A leader too old to know ``partitions_req`` answers the first partition of its
        request alone: the partitions it left out are asked one by one."""
        table = infos[0]
        source = self._lake.log_source(table) if self._lake is not None and spec.type != OffsetType.LATEST else None
        wanted = None if buckets is None else sorted(set(buckets))

        def send(node: ServerNode, groups: list[tuple[TableInfo, list[int]]]) -> list[ListedOffset]:
            listed = self._tablets.list_offsets(node, table.table_id, [(i.partition_id or 0, b) for i, b in groups], spec, source is not None)
            # A moved leader or a server not ready yet: the whole lookup is tried again.
            retry = next((item.error for item in listed if item.error and self._router.policy.should_retry(item.error, True)), None)
            if retry is not None:
                raise retry
            return listed

        by_key = {info.partition_id or 0: info for info in infos}
        found: dict[int, dict[int, int] | LakelogError] = {key: {} for key in by_key}
        for item in self._router.call_leaders(infos, wanted, send, "list offsets"):
            offsets = found.get(item.partition_id)
            if not isinstance(offsets, dict):  # a partition not asked, or one that failed already
                continue
            if item.error is not None:
                found[item.partition_id] = item.error
            elif source is not None and item.lake_snapshot_id >= 0:
                offsets[item.bucket] = lake_offset(source, by_key[item.partition_id], item.bucket, spec.ms, item.lake_snapshot_id)
            else:
                offsets[item.bucket] = item.offset
        if len(infos) > 1:
            expected = table.buckets if wanted is None else len(wanted)
            for key in [key for key, offsets in found.items() if isinstance(offsets, dict) and len(offsets) < expected]:
                found.update(self._log_offsets([by_key[key]], wanted, spec))
        return {key: dict(sorted(offsets.items())) if isinstance(offsets, dict) else offsets for key, offsets in found.items()}

    def describe_buckets(self, path: TablePath, partition_name: str | None = None) -> dict[int, BucketInfo]:
        """Every bucket (of the partition ``partition_name`` of a partitioned table), also when some
        leaders are down: their buckets come back as :meth:`BucketInfo.unavailable`, so the healthy
        ones can still be shown. A partition held by the lake only has no leader (-1) and no log:
        its buckets show their lake range, which ends at their high watermark."""

        def log(found: TableInfo) -> dict[int, BucketInfo]:
            physical_id = found.physical_id
            info = self._read("describe buckets", lambda: self._metadata.refresh(physical_id))
            table_id, partition_id = info.table_id, info.partition_id or 0

            def describe() -> dict[int, BucketInfo]:
                described: dict[int, BucketInfo] = {}
                for node, group in self._router.by_leader(info, None).items():
                    unavailable = {b: BucketInfo.unavailable(node.server_id) for b in group}
                    if not self._metadata.available(node.server_id):
                        described.update(unavailable)
                        continue
                    try:
                        described.update(self._tablets.describe_log_buckets(node, table_id, group, partition_id))
                    except (NetworkError, RequestTimeoutError):
                        described.update(unavailable)
                return dict(sorted(described.items()))

            return self._router.call(describe, f"describe buckets of {info.label}", resend_safe=True, tables=[physical_id])

        def lake(info: TableInfo, ranges: dict[int, LakeBucketOffset], snapshot_id: int) -> dict[int, BucketInfo]:
            return {
                b: BucketInfo(
                    NO_LEADER, r.log_end_offset, -1, lake_log_start_offset=r.log_start_offset, lake_log_end_offset=r.log_end_offset
                )
                for b, r in ranges.items()
            }

        return self._per_bucket(path, partition_name, log, lake)

    def repair_buckets(
        self, path: TablePath, buckets: Iterable[int] | None = None, local: bool = False, accept_truncation: bool = False
    ) -> list[BucketRepair]:
        """Ask each bucket's leader to repair it (``lakelog repair``): rebuild its remote manifest
        from the segment files, or (``local``, with ``accept_truncation``) accept that its local log
        lost acknowledged records and take writes again. One answer per bucket, failures included."""
        info = self._metadata.table(path)
        repairs: list[BucketRepair] = []
        for node, group in self._router.by_leader(info, buckets).items():
            try:
                repairs += self._tablets.repair_log(node, info.table_id, group, local, accept_truncation)
            except LakelogError as error:
                repairs += [BucketRepair(bucket, error=error) for bucket in group]
        return sorted(repairs, key=lambda repair: repair.bucket)

    # lake

    def get_lake_snapshot(self, path: TablePath) -> LakeSnapshot:
        """The latest lake snapshot the coordinator knows for ``path``, with each bucket's lake range.

        Raises :class:`LakeSnapshotNotExistError` while no tiering round has committed.
        """
        return self._read("get lake snapshot", lambda: self._coordinator.get_lake_snapshot(path))

    def get_consistent_lake_snapshots(self, paths: Iterable[TablePath]) -> dict[TablePath, int]:
        """Per table, the lake snapshot at the largest timestamp barrier every listed table has
        committed: read together they are one consistent cut (docs/contract.md, "Tiering, consistent cuts and cursors"). Read from the lake's
        own snapshot history, which holds only committed snapshots, so the answer is repeatable.

        Raises :class:`LakeSnapshotNotExistError` while the tables share no barrier.
        """
        chosen = list(paths)
        if self._lake is None:
            raise LakeError("this admin has no lake access (client.lake.enabled=false)")
        by_table = {path: self._lake.barrier_snapshots(path) for path in chosen}
        common = set.intersection(*(set(found) for found in by_table.values())) if by_table else set()
        if not common:
            raise LakeSnapshotNotExistError(f"tables {', '.join(map(str, chosen))} have no timestamp barrier in common yet")
        barrier = max(common)
        return {path: found[barrier] for path, found in by_table.items()}

    def get_tiering_jobs(self) -> list[TieringJobInfo]:
        """Every tiering job the coordinator heard from, least recently heard first."""
        return self._read("get tiering jobs", self._coordinator.get_tiering_jobs)

    def get_tiering_status(self) -> dict[TablePath, TableTieringStatus]:
        """Per table a tiering job reported, how fresh its lake is (docs/contract.md, "Tiering, consistent cuts and cursors"): the last barrier
        of the job heard from last, the lake's max timestamp and ends from the coordinator's lake
        snapshot, and the high watermarks from the tablet servers, read now."""
        latest_job = {path: job for job in self.get_tiering_jobs() for path in job.tables}
        status: dict[TablePath, TableTieringStatus] = {}
        for path, job in sorted(latest_job.items(), key=lambda item: str(item[0])):
            try:
                lake = self.get_lake_snapshot(path).bucket_offsets
            except LakeSnapshotNotExistError:
                lake = {}
            behind = sum(hw - (lake[key].log_end_offset if key in lake else 0) for key, hw in self._log_ends(path).items())
            max_timestamp = max((o.log_max_timestamp for o in lake.values()), default=-1)
            lag = time.time_ns() // 1_000_000 - max_timestamp if max_timestamp >= 0 else -1
            status[path] = TableTieringStatus(path, job.job_id, job.last_barrier, max_timestamp, lag, behind)
        return status

    def _log_ends(self, path: TablePath) -> dict[LakeBucketKey, int]:
        """The high watermarks keyed as lake snapshots key buckets: per bucket, or per
        ``(partition_id, bucket)`` of every partition that still has a log."""
        info = self._metadata.table(path)
        if not info.partitioned:
            return dict(self.list_offsets(path))
        listed = self.list_partitions_offsets(list(self._metadata.partitions(info, refresh=True).values()))
        return {(partition_id, bucket): hw for partition_id, offsets in listed.items() if offsets for bucket, hw in offsets.items()}

    def get_lake_config(self) -> LakeConfig:
        """The cluster's lake format and catalog properties, without secrets."""
        return self._read("get lake config", self._coordinator.get_lake_config)


def lake_offset(source: LogSource, info: TableInfo, bucket: int, ms: int, snapshot_id: int) -> int:
    """The first offset at or after ``ms`` in lake snapshot ``snapshot_id``, asked of the LogSource."""
    try:
        return source.lookup_log_offset_by_timestamp(LookupContext(info.partition_name, bucket, ms, snapshot_id))
    except LakelogError:
        raise
    except Exception as exc:  # noqa: BLE001 - a plugin's own failure must reach the caller as a lakelog error
        raise LakeError(f"{info.path} bucket {bucket}: the lake LogSource failed to look up timestamp {ms}: {exc}") from exc


def _lake_offset_or_end(source: LogSource, info: TableInfo, bucket: int, ms: int, snapshot_id: int, held: LakeBucketOffset) -> int:
    """As :func:`lake_offset` for a bucket the lake holds all of: its end when no record is at or after ``ms``."""
    if held.log_end_offset <= held.log_start_offset:
        return held.log_end_offset
    try:
        return lake_offset(source, info, bucket, ms, snapshot_id)
    except InvalidTimestampError:
        return held.log_end_offset


def _buckets(info: TableInfo, buckets: Iterable[int] | None) -> list[int]:
    wanted = list(range(info.buckets)) if buckets is None else sorted(buckets)
    for bucket in wanted:
        if not 0 <= bucket < info.buckets:
            raise UnknownBucketError(f"{info.label} has no bucket {bucket} (it has buckets 0..{info.buckets - 1})")
    return wanted
