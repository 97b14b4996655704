"""CoordinatorService as the client calls it: one method per RPC, lakelog dataclasses in and out."""

from __future__ import annotations

from typing import Iterable

from lakelog.errors import error_from_code
from lakelog.lake_config import LakeConfig
from lakelog.metadata import (
    LakeSnapshot,
    TableDescriptor,
    TableInfo,
    TablePath,
    TieringJobInfo,
    schema_to_bytes,
)
from lakelog.rpc import codec
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceStub
from lakelog.rpc.rpc_edge import RpcEdge
from lakelog.client.rpc.messages import ClusterMetadata


class CoordinatorGateway:
    def __init__(self, edge: RpcEdge, address: str) -> None:
        self.address = address
        self._edge = edge
        self._target = f"coordinator {address}"

    def _stub(self) -> CoordinatorServiceStub:
        return CoordinatorServiceStub(self._edge.channel(self.address))

    # databases

    def create_database(self, name: str, ignore_if_exists: bool, comment: str) -> None:
        request = pb.CreateDatabaseRequest(database_name=name, ignore_if_exists=ignore_if_exists, comment=comment)
        self._edge.call(self._stub().CreateDatabase, request, self._target)

    def drop_database(self, name: str, ignore_if_not_exists: bool, cascade: bool) -> None:
        request = pb.DropDatabaseRequest(database_name=name, ignore_if_not_exists=ignore_if_not_exists, cascade=cascade)
        self._edge.call(self._stub().DropDatabase, request, self._target)

    def list_databases(self) -> list[str]:
        return list(self._edge.call(self._stub().ListDatabases, pb.ListDatabasesRequest(), self._target).database_name)

    # tables

    def create_table(self, path: TablePath, descriptor: TableDescriptor, ignore_if_exists: bool) -> int:
        request = pb.CreateTableRequest(
            table_path=codec.path_to_pb(path),
            schema=schema_to_bytes(descriptor.schema),
            bucket_count=descriptor.buckets,
            properties=codec.properties_to_pb(dict(descriptor.properties)),
            comment=descriptor.comment,
            ignore_if_exists=ignore_if_exists,
        )
        return int(self._edge.call(self._stub().CreateTable, request, self._target).table_id)

    def drop_table(self, path: TablePath, ignore_if_not_exists: bool) -> None:
        request = pb.DropTableRequest(table_path=codec.path_to_pb(path), ignore_if_not_exists=ignore_if_not_exists)
        self._edge.call(self._stub().DropTable, request, self._target)

    def list_tables(self, database: str) -> list[str]:
        request = pb.ListTablesRequest(database_name=database)
        return list(self._edge.call(self._stub().ListTables, request, self._target).table_name)

    def get_table_info(self, path: TablePath) -> TableInfo:
        request = pb.GetTableInfoRequest(table_path=codec.path_to_pb(path))
        return codec.table_info_from_pb(self._edge.call(self._stub().GetTableInfo, request, self._target).table_info)

    def get_metadata(self, paths: Iterable[TablePath] = (), table_ids: Iterable[int] = ()) -> ClusterMetadata:
        """Every tablet server, and the tables named (by path or id) with their bucket leaders."""
        request = pb.MetadataRequest(table_path=[codec.path_to_pb(p) for p in paths], table_id=list(table_ids))
        response = self._edge.call(self._stub().GetMetadata, request, self._target)
        return ClusterMetadata(
            {n.node_id: codec.node_from_pb(n) for n in response.tablet_servers},
            [codec.table_metadata_from_pb(m) for m in response.table_metadata],
            frozenset(response.unavailable_server_ids),
        )

    # lake

    def get_lake_snapshot(self, path: TablePath) -> LakeSnapshot:
        request = pb.GetLakeSnapshotRequest(table_path=codec.path_to_pb(path))
        response = self._edge.call(self._stub().GetLakeSnapshot, request, self._target)
        return codec.lake_snapshot_from_pb(response.snapshot_id, response.bucket_snapshots)

    def commit_lake_snapshot(self, table_id: int, snapshot: LakeSnapshot) -> None:
        request = pb.CommitLakeTableSnapshotRequest(
            tables_req=[
                pb.PbLakeTableSnapshotInfo(
                    table_id=table_id, snapshot_id=snapshot.snapshot_id, buckets_req=codec.lake_buckets_to_pb(snapshot)
                )
            ]
        )
        for item in self._edge.call(self._stub().CommitLakeTableSnapshot, request, self._target).table_resp:
            if item.error_code:
                raise error_from_code(item.error_code, item.error_message)

    def get_lake_config(self) -> LakeConfig:
        return codec.lake_config_from_pb(self._edge.call(self._stub().GetLakeConfig, pb.GetLakeConfigRequest(), self._target))

    # tiering jobs

    def tiering_heartbeat(self, job_id: str, tables: Iterable[TablePath], barrier: int) -> None:
        request = pb.TieringHeartbeatRequest(job_id=job_id, tables=[codec.path_to_pb(p) for p in tables], barrier=barrier)
        self._edge.call(self._stub().TieringHeartbeat, request, self._target)

    def get_tiering_jobs(self) -> list[TieringJobInfo]:
        response = self._edge.call(self._stub().GetTieringJobs, pb.GetTieringJobsRequest(), self._target)
        return [
            TieringJobInfo(job.job_id, tuple(codec.path_from_pb(p) for p in job.tables), job.last_barrier, job.last_heartbeat_ms)
            for job in response.jobs
        ]
