"""CoordinatorService as the client calls it: one method per RPC, lakelog dataclasses in and out."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence, TypeVar

from lakelog.consumer_groups import GroupBucket, GroupDescription, GroupSummary, HeartbeatAnswer
from lakelog.security.writer_tokens import WriterIdentity
from lakelog.errors import InvalidConfigError, NetworkError, RequestTimeoutError, error_from_code
from lakelog.lake_config import LakeConfig
from lakelog.metadata import (
    LakeSnapshot,
    PartitionInfo,
    SchemaInfo,
    TableChange,
    TableDescriptor,
    TableInfo,
    TablePath,
    TieringJobInfo,
)
from lakelog.record.schema_bytes import schema_from_bytes, schema_to_bytes
from lakelog.rpc import codec
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceStub
from lakelog.rpc.rpc_edge import RpcEdge
from lakelog.client.rpc.messages import ClusterMetadata

Response = TypeVar("Response")


class CoordinatorGateway:
    """Calls the coordinator at one of ``addresses`` (``bootstrap.servers``): the one that answered
    last, and the next one after a call that could not reach it, so any live address bootstraps."""

    def __init__(self, edge: RpcEdge, addresses: Sequence[str]) -> None:
        if not addresses:
            raise InvalidConfigError("no coordinator address: give one to connect() or set bootstrap.servers")
        self._addresses = list(addresses)
        self._current = 0
        self._edge = edge

    @property
    def address(self) -> str:
        return self._addresses[self._current]

    def _call(self, method: Callable[[CoordinatorServiceStub], Callable[..., Response]], request: Any) -> Response:
        index = self._current
        address = self._addresses[index]
        try:
            return self._edge.call(method(self._edge.stub(address, CoordinatorServiceStub)), request, f"coordinator {address}")
        except (NetworkError, RequestTimeoutError):
            self._current = (index + 1) % len(self._addresses)
            raise

    # databases

    def create_database(self, name: str, ignore_if_exists: bool, comment: str) -> None:
        request = pb.CreateDatabaseRequest(database_name=name, ignore_if_exists=ignore_if_exists, comment=comment)
        self._call(lambda stub: stub.CreateDatabase, request)

    def drop_database(self, name: str, ignore_if_not_exists: bool, cascade: bool) -> None:
        request = pb.DropDatabaseRequest(database_name=name, ignore_if_not_exists=ignore_if_not_exists, cascade=cascade)
        self._call(lambda stub: stub.DropDatabase, request)

    def list_databases(self) -> list[str]:
        return list(self._call(lambda stub: stub.ListDatabases, pb.ListDatabasesRequest()).database_name)

    # tables

    def create_table(self, path: TablePath, descriptor: TableDescriptor, ignore_if_exists: bool) -> int:
        request = pb.CreateTableRequest(
            table_path=codec.path_to_pb(path),
            schema=schema_to_bytes(descriptor.schema),
            bucket_count=descriptor.buckets,
            properties=codec.properties_to_pb(dict(descriptor.properties)),
            comment=descriptor.comment,
            ignore_if_exists=ignore_if_exists,
            bucket_keys=list(descriptor.bucket_keys),
            partition_keys=list(descriptor.partition_keys),
        )
        return int(self._call(lambda stub: stub.CreateTable, request).table_id)

    def drop_table(self, path: TablePath, ignore_if_not_exists: bool) -> None:
        request = pb.DropTableRequest(table_path=codec.path_to_pb(path), ignore_if_not_exists=ignore_if_not_exists)
        self._call(lambda stub: stub.DropTable, request)

    def list_tables(self, database: str) -> list[str]:
        request = pb.ListTablesRequest(database_name=database)
        return list(self._call(lambda stub: stub.ListTables, request).table_name)

    def alter_table(self, path: TablePath, changes: Sequence[TableChange], ignore_if_not_exists: bool) -> int:
        request = pb.AlterTableRequest(
            table_path=codec.path_to_pb(path), changes=[codec.table_change_to_pb(c) for c in changes], ignore_if_not_exists=ignore_if_not_exists
        )
        return int(self._call(lambda stub: stub.AlterTable, request).schema_id)

    def get_table_schema(self, path: TablePath, schema_id: int) -> SchemaInfo:
        response = self._call(lambda stub: stub.GetTableSchema, pb.GetTableSchemaRequest(table_path=codec.path_to_pb(path), schema_id=schema_id))
        return SchemaInfo(response.schema_id, schema_from_bytes(response.schema))

    def get_table_info(self, path: TablePath) -> TableInfo:
        request = pb.GetTableInfoRequest(table_path=codec.path_to_pb(path))
        return codec.table_info_from_pb(self._call(lambda stub: stub.GetTableInfo, request).table_info)

    def get_metadata(self, paths: Iterable[TablePath] = (), table_ids: Iterable[int] = ()) -> ClusterMetadata:
        """Every tablet server, and the tables named (by path or id) with their bucket leaders."""
        request = pb.MetadataRequest(table_path=[codec.path_to_pb(p) for p in paths], table_id=list(table_ids))
        response = self._call(lambda stub: stub.GetMetadata, request)
        return ClusterMetadata(
            {n.node_id: codec.node_from_pb(n) for n in response.tablet_servers},
            [codec.table_metadata_from_pb(m) for m in response.table_metadata],
            frozenset(response.unavailable_server_ids),
        )

    # partitions

    def create_partition(self, path: TablePath, spec: dict[str, str], ignore_if_exists: bool) -> int:
        request = pb.CreatePartitionRequest(
            table_path=codec.path_to_pb(path), partition_spec=codec.partition_spec_to_pb(spec), ignore_if_exists=ignore_if_exists
        )
        return int(self._call(lambda stub: stub.CreatePartition, request).partition_id)

    def drop_partition(self, path: TablePath, spec: dict[str, str], ignore_if_not_exists: bool) -> None:
        request = pb.DropPartitionRequest(
            table_path=codec.path_to_pb(path),
            partition_spec=codec.partition_spec_to_pb(spec),
            ignore_if_not_exists=ignore_if_not_exists,
        )
        self._call(lambda stub: stub.DropPartition, request)

    def list_partition_infos(self, path: TablePath) -> list[PartitionInfo]:
        request = pb.ListPartitionInfosRequest(table_path=codec.path_to_pb(path))
        response = self._call(lambda stub: stub.ListPartitionInfos, request)
        return [codec.partition_info_from_pb(item) for item in response.partitions_info]

    # lake

    def get_lake_snapshot(self, path: TablePath) -> LakeSnapshot:
        request = pb.GetLakeSnapshotRequest(table_path=codec.path_to_pb(path))
        response = self._call(lambda stub: stub.GetLakeSnapshot, request)
        return codec.lake_snapshot_from_pb(response.snapshot_id, response.bucket_snapshots)

    def commit_lake_snapshot(self, table_id: int, snapshot: LakeSnapshot) -> None:
        request = pb.CommitLakeTableSnapshotRequest(
            tables_req=[
                pb.PbLakeTableSnapshotInfo(
                    table_id=table_id, snapshot_id=snapshot.snapshot_id, buckets_req=codec.lake_buckets_to_pb(snapshot)
                )
            ]
        )
        for item in self._call(lambda stub: stub.CommitLakeTableSnapshot, request).table_resp:
            if item.error_code:
                raise error_from_code(item.error_code, item.error_message)

    def get_lake_config(self) -> LakeConfig:
        return codec.lake_config_from_pb(self._call(lambda stub: stub.GetLakeConfig, pb.GetLakeConfigRequest()))

    # idempotent writers

    def init_writer(self) -> WriterIdentity:
        response = self._call(lambda stub: stub.InitWriter, pb.InitWriterRequest())
        return WriterIdentity(response.writer_id, response.writer_token)

    # tiering jobs

    def tiering_heartbeat(self, job_id: str, tables: Iterable[TablePath], barrier: int) -> None:
        request = pb.TieringHeartbeatRequest(job_id=job_id, tables=[codec.path_to_pb(p) for p in tables], barrier=barrier)
        self._call(lambda stub: stub.TieringHeartbeat, request)

    def get_tiering_jobs(self) -> list[TieringJobInfo]:
        response = self._call(lambda stub: stub.GetTieringJobs, pb.GetTieringJobsRequest())
        return [
            TieringJobInfo(job.job_id, tuple(codec.path_from_pb(p) for p in job.tables), job.last_barrier, job.last_heartbeat_ms)
            for job in response.jobs
        ]

    # consumer groups

    def group_heartbeat(
        self, group_id: str, member_id: str, member_epoch: int, table_id: int, session_timeout_ms: int, owned: Iterable[GroupBucket], client_id: str
    ) -> HeartbeatAnswer:
        request = pb.GroupHeartbeatRequest(
            group_id=group_id,
            member_id=member_id,
            member_epoch=member_epoch,
            table_id=table_id,
            session_timeout_ms=session_timeout_ms,
            owned=codec.group_buckets_to_pb(owned),
            client_id=client_id,
        )
        return codec.heartbeat_answer_from_pb(table_id, self._call(lambda stub: stub.GroupHeartbeat, request))

    def commit_group_offsets(self, group_id: str, member_id: str, member_epoch: int, table_id: int, offsets: dict[GroupBucket, int]) -> None:
        request = pb.CommitGroupOffsetsRequest(
            group_id=group_id, member_id=member_id, member_epoch=member_epoch, table_id=table_id, offsets=codec.group_offsets_to_pb(offsets)
        )
        self._call(lambda stub: stub.CommitGroupOffsets, request)

    def list_groups(self) -> list[GroupSummary]:
        response = self._call(lambda stub: stub.ListGroups, pb.ListGroupsRequest())
        return [codec.group_summary_from_pb(item) for item in response.groups]

    def describe_group(self, group_id: str) -> GroupDescription:
        response = self._call(lambda stub: stub.DescribeGroup, pb.DescribeGroupRequest(group_id=group_id))
        return codec.group_description_from_pb(group_id, response)

    def list_group_offsets(self, group_id: str, table_id: int) -> dict[GroupBucket, int]:
        response = self._call(lambda stub: stub.ListGroupOffsets, pb.ListGroupOffsetsRequest(group_id=group_id, table_id=table_id))
        return codec.group_offsets_from_pb(table_id, response.offsets)

    def reset_group_offsets(self, group_id: str, table_id: int, offsets: dict[GroupBucket, int]) -> None:
        request = pb.ResetGroupOffsetsRequest(group_id=group_id, table_id=table_id, offsets=codec.group_offsets_to_pb(offsets))
        self._call(lambda stub: stub.ResetGroupOffsets, request)
