"""Admin: databases, tables, offsets, bucket descriptions and lake snapshots."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Callable, Iterable

from lakelog.errors import (
    InvalidRequestError,
    LakeError,
    LakelogError,
    LakeSnapshotNotExistError,
    NetworkError,
    NotLeaderError,
    UnknownBucketError,
    error_from_code,
)
from lakelog.lake.lake_config import LakeConfig
from lakelog.metadata import (
    BucketInfo,
    LakeSnapshot,
    OffsetSpec,
    OffsetType,
    ServerNode,
    TableDescriptor,
    TableInfo,
    TablePath,
    TableTieringStatus,
    TieringJobInfo,
    schema_to_bytes,
)
from lakelog.rpc import codec
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.client.lake.lake_sources import LakeSources
from lakelog.client.lake.log_source import LogSource, LookupContext
from lakelog.client.metadata import MetadataCache
from lakelog.client.rpc_client import RpcClient


LEADER_RETRIES = 5


class Admin:
    def __init__(self, rpc: RpcClient, metadata: MetadataCache, lake: LakeSources | None = None) -> None:
        """``lake``: where list_offsets finds a table's LogSource (None: an admin without the lake)."""
        self._rpc = rpc
        self._metadata = metadata
        self._lake = lake

    def _coordinator(self, method: str, request: object) -> object:
        stub = self._rpc.coordinator()
        return self._rpc.call(getattr(stub, method), request, f"coordinator {self._rpc.bootstrap}")

    # databases

    def create_database(self, name: str, ignore_if_exists: bool = False, comment: str = "") -> None:
        self._coordinator(
            "CreateDatabase", pb.CreateDatabaseRequest(database_name=name, ignore_if_exists=ignore_if_exists, comment=comment)
        )

    def drop_database(self, name: str, ignore_if_not_exists: bool = False, cascade: bool = False) -> None:
        self._coordinator(
            "DropDatabase",
            pb.DropDatabaseRequest(database_name=name, ignore_if_not_exists=ignore_if_not_exists, cascade=cascade),
        )

    def list_databases(self) -> list[str]:
        return list(self._coordinator("ListDatabases", pb.ListDatabasesRequest()).database_name)  # type: ignore[attr-defined]

    # tables

    def create_table(self, path: TablePath, descriptor: TableDescriptor, ignore_if_exists: bool = False) -> int:
        descriptor.validate()
        request = pb.CreateTableRequest(
            table_path=codec.path_to_pb(path),
            schema=schema_to_bytes(descriptor.schema),
            bucket_count=descriptor.buckets,
            properties=codec.properties_to_pb(dict(descriptor.properties)),
            comment=descriptor.comment,
            ignore_if_exists=ignore_if_exists,
        )
        return int(self._coordinator("CreateTable", request).table_id)  # type: ignore[attr-defined]

    def drop_table(self, path: TablePath, ignore_if_not_exists: bool = False) -> None:
        self._coordinator(
            "DropTable", pb.DropTableRequest(table_path=codec.path_to_pb(path), ignore_if_not_exists=ignore_if_not_exists)
        )
        self._metadata.forget(path)

    def list_tables(self, database: str) -> list[str]:
        return list(self._coordinator("ListTables", pb.ListTablesRequest(database_name=database)).table_name)  # type: ignore[attr-defined]

    def get_table_info(self, path: TablePath) -> TableInfo:
        response = self._coordinator("GetTableInfo", pb.GetTableInfoRequest(table_path=codec.path_to_pb(path)))
        return codec.table_info_from_pb(response.table_info)  # type: ignore[attr-defined]

    # offsets and buckets

    def _by_leader(self, info: TableInfo, wanted: list[int]) -> dict[ServerNode, list[int]]:
        groups: dict[ServerNode, list[int]] = defaultdict(list)
        for bucket in wanted:
            if not 0 <= bucket < info.buckets:
                raise UnknownBucketError(f"{info.path} has no bucket {bucket} (it has buckets 0..{info.buckets - 1})")
            groups[self._metadata.leader(info.table_id, bucket)].append(bucket)
        return groups

    def _leader_call(self, info: TableInfo, buckets: Iterable[int] | None, method: str, build: Callable[[list[int]], Any]) -> list[Any]:
        """Send one request per leader; on a moved or unreachable leader refresh metadata and retry."""
        wanted = list(range(info.buckets)) if buckets is None else list(buckets)
        for attempt in range(LEADER_RETRIES + 1):
            try:
                responses = []
                for node, group in self._by_leader(info, wanted).items():
                    stub = self._rpc.tablet(node.address)
                    responses.append(self._rpc.call(getattr(stub, method), build(group), f"tablet server {node.address}"))
                return responses
            except (NetworkError, NotLeaderError):
                if attempt == LEADER_RETRIES:
                    raise
                time.sleep(0.2 * (attempt + 1))
                info = self._metadata.refresh(info.table_id)
        raise AssertionError("unreachable")

    def list_offsets(
        self, path: TablePath, buckets: Iterable[int] | None = None, spec: OffsetSpec | None = None
    ) -> dict[int, int]:
        """Per bucket, the offset ``spec`` names (default: latest). With the table's LogSource the
        earliest offset counts the lake, and a timestamp the lake holds is resolved in the lake."""
        spec = spec or OffsetSpec.latest()
        info = self._metadata.table(path)
        source = self._lake.log_source(info) if self._lake is not None and spec.type != OffsetType.LATEST else None
        offsets: dict[int, int] = {}
        responses = self._leader_call(
            info,
            buckets,
            "ListOffsets",
            lambda group: pb.ListOffsetsRequest(
                follower_server_id=-1,
                offset_type=int(spec.type),
                table_id=info.table_id,
                bucket_id=group,
                start_timestamp=spec.ms,
                enable_lake=source is not None,
            ),
        )
        for response in responses:
            for item in response.buckets_resp:
                if item.error_code:
                    raise error_from_code(item.error_code, item.error_message)
                offsets[item.bucket_id] = item.offset
                if source is not None and item.lake_snapshot_id >= 0:
                    offsets[item.bucket_id] = _lake_offset(source, info, item.bucket_id, spec.ms, item.lake_snapshot_id)
        return dict(sorted(offsets.items()))

    def describe_buckets(self, path: TablePath) -> dict[int, BucketInfo]:
        info = self._metadata.table(path)
        described: dict[int, BucketInfo] = {}
        responses = self._leader_call(
            info, None, "DescribeLogBuckets", lambda group: pb.DescribeLogBucketsRequest(table_id=info.table_id, bucket_id=group)
        )
        for response in responses:
            for item in response.buckets:
                if item.error_code:
                    raise error_from_code(item.error_code, item.error_message)
                described[item.bucket_id] = codec.bucket_info_from_pb(item)
        return dict(sorted(described.items()))

    # lake

    def get_lake_snapshot(self, path: TablePath) -> LakeSnapshot:
        """The latest lake snapshot the coordinator knows for ``path``, with each bucket's lake range.

        Raises :class:`LakeSnapshotNotExistError` while no tiering round has committed.
        """
        response = self._coordinator("GetLakeSnapshot", pb.GetLakeSnapshotRequest(table_path=codec.path_to_pb(path)))
        return codec.lake_snapshot_from_pb(response.snapshot_id, response.bucket_snapshots)  # type: ignore[attr-defined]

    def get_consistent_lake_snapshots(self, paths: Iterable[TablePath]) -> dict[TablePath, int]:
        """Per table, the lake snapshot at the largest timestamp barrier every listed table has
        committed: read together they are one consistent cut (SPEC section 9). Read from the lake's
        own snapshot history, which holds only committed snapshots, so the answer is repeatable.

        Raises :class:`LakeSnapshotNotExistError` while the tables share no barrier.
        """
        # PyIceberg is imported here, not at the top: a client without it must still import lakelog.
        from lakelog.lake.snapshot_summary import barrier_snapshots

        chosen = list(paths)
        if self._lake is None:
            raise LakeError("this admin has no lake access (client.lake.enabled=false)")
        catalog = self._lake.lake_catalog()
        by_table = {path: barrier_snapshots(catalog.load_table(path)) for path in chosen}
        common = set.intersection(*(set(found) for found in by_table.values())) if by_table else set()
        if not common:
            raise LakeSnapshotNotExistError(f"tables {', '.join(map(str, chosen))} have no timestamp barrier in common yet")
        barrier = max(common)
        return {path: found[barrier] for path, found in by_table.items()}

    def barrier_safe_time(self, paths: Iterable[TablePath]) -> int:
        """The smallest GetServerTime of the tablet servers leading the tables' buckets: a time
        every one of them has passed, so no record stamped at or before it is still to come. The
        tiering job takes its barrier from here, not from its own clock."""
        infos = [self._metadata.table(path) for path in paths]
        leaders = {self._metadata.leader(info.table_id, b) for info in infos for b in range(info.buckets)}
        if not leaders:
            raise InvalidRequestError("a barrier needs at least one table")
        times = []
        for node in leaders:
            stub = self._rpc.tablet(node.address)
            times.append(self._rpc.call(stub.GetServerTime, pb.GetServerTimeRequest(), f"tablet server {node.address}").server_time_ms)
        return min(times)

    def tiering_heartbeat(self, job_id: str, tables: Iterable[TablePath], barrier: int) -> None:
        """A tiering job's report after a round (the job's call): the coordinator keeps the last one."""
        request = pb.TieringHeartbeatRequest(job_id=job_id, tables=[codec.path_to_pb(p) for p in tables], barrier=barrier)
        self._coordinator("TieringHeartbeat", request)

    def get_tiering_jobs(self) -> list[TieringJobInfo]:
        """Every tiering job the coordinator heard from, least recently heard first."""
        response = self._coordinator("GetTieringJobs", pb.GetTieringJobsRequest())
        return [
            TieringJobInfo(job.job_id, tuple(codec.path_from_pb(p) for p in job.tables), job.last_barrier, job.last_heartbeat_ms)
            for job in response.jobs  # type: ignore[attr-defined]
        ]

    def get_tiering_status(self) -> dict[TablePath, TableTieringStatus]:
        """Per table a tiering job reported, how fresh its lake is (SPEC section 9): the last barrier
        of the job heard from last, the lake's max timestamp and ends from the coordinator's lake
        snapshot, and the high watermarks from the tablet servers, read now."""
        latest_job = {path: job for job in self.get_tiering_jobs() for path in job.tables}
        status: dict[TablePath, TableTieringStatus] = {}
        for path, job in sorted(latest_job.items(), key=lambda item: str(item[0])):
            try:
                lake = self.get_lake_snapshot(path).bucket_offsets
            except LakeSnapshotNotExistError:
                lake = {}
            behind = sum(hw - (lake[b].log_end_offset if b in lake else 0) for b, hw in self.list_offsets(path).items())
            max_timestamp = max((o.log_max_timestamp for o in lake.values()), default=-1)
            lag = time.time_ns() // 1_000_000 - max_timestamp if max_timestamp >= 0 else -1
            status[path] = TableTieringStatus(path, job.job_id, job.last_barrier, max_timestamp, lag, behind)
        return status

    def get_lake_config(self) -> LakeConfig:
        """The cluster's lake format and catalog properties, without secrets."""
        return codec.lake_config_from_pb(self._coordinator("GetLakeConfig", pb.GetLakeConfigRequest()))  # type: ignore[arg-type]

    def commit_lake_snapshot(self, path: TablePath, snapshot: LakeSnapshot) -> None:
        """Tell the coordinator about a lake snapshot committed to Iceberg (the tiering job's call).

        Raises :class:`StaleLakeSnapshotError` if the coordinator already holds a newer one.
        """
        info = self._metadata.table(path)
        request = pb.CommitLakeTableSnapshotRequest(
            tables_req=[
                pb.PbLakeTableSnapshotInfo(
                    table_id=info.table_id, snapshot_id=snapshot.snapshot_id, buckets_req=codec.lake_buckets_to_pb(snapshot)
                )
            ]
        )
        for item in self._coordinator("CommitLakeTableSnapshot", request).table_resp:  # type: ignore[attr-defined]
            if item.error_code:
                raise error_from_code(item.error_code, item.error_message)


def _lake_offset(source: LogSource, info: TableInfo, bucket: int, ms: int, snapshot_id: int) -> int:
    """The first offset at or after ``ms`` in lake snapshot ``snapshot_id``, asked of the LogSource."""
    try:
        return source.lookup_log_offset_by_timestamp(LookupContext("", bucket, ms, snapshot_id))
    except LakelogError:
        raise
    except Exception as exc:  # noqa: BLE001 - a plugin's own failure must reach the caller as a lakelog error
        raise LakeError(f"{info.path} bucket {bucket}: the lake LogSource failed to look up timestamp {ms}: {exc}") from exc
