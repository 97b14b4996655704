"""CoordinatorService over gRPC: translate, call :class:`Coordinator`, translate back."""

from __future__ import annotations

import grpc

from lakelog.errors import InvalidRequestError, InvalidTableError, LakelogError
from lakelog.cluster_state import ServerNode
from lakelog.metadata import TableDescriptor
from lakelog.record.schema_bytes import schema_from_bytes, schema_to_bytes
from lakelog.rpc import codec
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceServicer
from lakelog.server.coordinator.coordinator import Coordinator
from lakelog.server.coordinator.groups.group_coordinator import GroupCoordinator
from lakelog.server.metrics.server_metrics import ServerMetrics
from lakelog.server.rpc.auth_interceptor import CallerName
from lakelog.server.rpc.error_boundary import rpc_method
from lakelog.server.rpc.grpc_server import RpcServer, add_servicer
from lakelog.server.rpc.request_checks import check_lake_buckets


class CoordinatorService(CoordinatorServiceServicer):
    def __init__(
        self, coordinator: Coordinator, groups: GroupCoordinator, self_node: ServerNode, metrics: ServerMetrics, caller: CallerName
    ) -> None:
        self._coordinator = coordinator
        self._groups = groups
        self._node = self_node
        self.metrics = metrics
        self._caller = caller

    def register(self, server: RpcServer) -> None:
        add_servicer(server, self, "CoordinatorService")

    @rpc_method
    def CreateDatabase(self, request: pb.CreateDatabaseRequest, context: grpc.ServicerContext) -> pb.CreateDatabaseResponse:
        self._coordinator.create_database(request.database_name, request.ignore_if_exists, request.comment)
        return pb.CreateDatabaseResponse()

    @rpc_method
    def DropDatabase(self, request: pb.DropDatabaseRequest, context: grpc.ServicerContext) -> pb.DropDatabaseResponse:
        self._coordinator.drop_database(request.database_name, request.ignore_if_not_exists, request.cascade)
        return pb.DropDatabaseResponse()

    @rpc_method
    def ListDatabases(self, request: pb.ListDatabasesRequest, context: grpc.ServicerContext) -> pb.ListDatabasesResponse:
        return pb.ListDatabasesResponse(database_name=self._coordinator.list_databases())

    @rpc_method
    def CreateTable(self, request: pb.CreateTableRequest, context: grpc.ServicerContext) -> pb.CreateTableResponse:
        path = codec.path_from_pb(request.table_path)
        try:
            schema = schema_from_bytes(request.schema)
        except InvalidRequestError as exc:
            raise InvalidTableError(f"table {path}: {exc.message}") from None
        descriptor = TableDescriptor(
            schema,
            request.bucket_count,
            codec.properties_from_pb(list(request.properties)),
            request.comment,
            tuple(request.bucket_keys),
            tuple(request.partition_keys),
        )
        table_id = self._coordinator.create_table(path, descriptor, request.ignore_if_exists)
        return pb.CreateTableResponse(table_id=table_id)

    @rpc_method
    def DropTable(self, request: pb.DropTableRequest, context: grpc.ServicerContext) -> pb.DropTableResponse:
        self._coordinator.drop_table(codec.path_from_pb(request.table_path), request.ignore_if_not_exists)
        return pb.DropTableResponse()

    @rpc_method
    def AlterTable(self, request: pb.AlterTableRequest, context: grpc.ServicerContext) -> pb.AlterTableResponse:
        changes = [codec.table_change_from_pb(change, f"AlterTable: changes[{i}]") for i, change in enumerate(request.changes)]
        schema_id = self._coordinator.alter_table(codec.path_from_pb(request.table_path), changes, request.ignore_if_not_exists)
        return pb.AlterTableResponse(schema_id=schema_id)

    @rpc_method
    def GetTableSchema(self, request: pb.GetTableSchemaRequest, context: grpc.ServicerContext) -> pb.GetTableSchemaResponse:
        found = self._coordinator.table_schema(codec.path_from_pb(request.table_path), request.schema_id)
        return pb.GetTableSchemaResponse(schema_id=found.schema_id, schema=schema_to_bytes(found.schema))

    @rpc_method
    def ListTables(self, request: pb.ListTablesRequest, context: grpc.ServicerContext) -> pb.ListTablesResponse:
        return pb.ListTablesResponse(table_name=self._coordinator.list_tables(request.database_name))

    @rpc_method
    def GetTableInfo(self, request: pb.GetTableInfoRequest, context: grpc.ServicerContext) -> pb.GetTableInfoResponse:
        which = request.WhichOneof("table")
        if which == "table_path":
            info = self._coordinator.table(codec.path_from_pb(request.table_path))
        elif which == "table_id":
            info = self._coordinator.table_by_id(request.table_id)
        else:
            raise InvalidRequestError("GetTableInfo needs table_path or table_id")
        return pb.GetTableInfoResponse(table_info=codec.table_info_to_pb(info))

    @rpc_method
    def GetMetadata(self, request: pb.MetadataRequest, context: grpc.ServicerContext) -> pb.MetadataResponse:
        infos = [self._coordinator.table(codec.path_from_pb(p)) for p in request.table_path]
        assignments = [a for info in infos for a in self._coordinator.assignments(info)]
        assignments += [self._coordinator.assignment_by_id(physical_id) for physical_id in request.table_id]
        return pb.MetadataResponse(
            coordinator_server=codec.node_to_pb(self._node),
            tablet_servers=[codec.node_to_pb(node) for node in self._coordinator.tablet_servers()],
            table_metadata=[codec.table_metadata_to_pb(a) for a in assignments],
            unavailable_server_ids=sorted(self._coordinator.liveness.down()),
        )

    @rpc_method
    def TabletServerHeartbeat(
        self, request: pb.TabletServerHeartbeatRequest, context: grpc.ServicerContext
    ) -> pb.TabletServerHeartbeatResponse:
        self._coordinator.tablet_server_heartbeat(request.server_id)
        return pb.TabletServerHeartbeatResponse()

    @rpc_method
    def RegisterTabletServer(
        self, request: pb.RegisterTabletServerRequest, context: grpc.ServicerContext
    ) -> pb.RegisterTabletServerResponse:
        node = codec.node_from_pb(request.server)
        if node.server_id < 0 or not node.host or not 0 < node.port < 65536:
            raise InvalidRequestError(f"RegisterTabletServer needs an id >= 0, a host and a port, got {node}")
        assignments, lake_offsets = self._coordinator.register_tablet_server(node)
        return pb.RegisterTabletServerResponse(
            table_metadata=[codec.table_metadata_to_pb(a) for a in assignments],
            lake_offsets=codec.lake_offsets_to_pb(lake_offsets),
            writer_key=self._coordinator.writer_key,
        )

    @rpc_method
    def CommitLakeTableSnapshot(
        self, request: pb.CommitLakeTableSnapshotRequest, context: grpc.ServicerContext
    ) -> pb.CommitLakeTableSnapshotResponse:
        """Each table commits or fails on its own: the error goes in that table's response."""
        responses = []
        for index, table in enumerate(request.tables_req):
            try:
                where = f"CommitLakeTableSnapshot: tables_req[{index}]"
                if table.snapshot_id < 0:
                    raise InvalidRequestError(f"{where}.snapshot_id {table.snapshot_id} is negative")
                info = self._coordinator.table_by_id(table.table_id)
                check_lake_buckets(f"{where}.buckets_req", table.buckets_req, info.buckets)
                snapshot = codec.lake_snapshot_from_pb(table.snapshot_id, table.buckets_req)
                commit = self._coordinator.commit_lake_snapshot(table.table_id, snapshot)
                self.metrics.record_lake_commit(str(commit.path), commit.records_added)
                responses.append(pb.PbCommitLakeTableSnapshotRespForTable(table_id=table.table_id))
            except LakelogError as error:
                self.metrics.count_error("CommitLakeTableSnapshot", error)
                responses.append(
                    pb.PbCommitLakeTableSnapshotRespForTable(
                        table_id=table.table_id, error_code=error.code, error_message=error.message
                    )
                )
        return pb.CommitLakeTableSnapshotResponse(table_resp=responses)

    @rpc_method
    def GetLakeSnapshot(self, request: pb.GetLakeSnapshotRequest, context: grpc.ServicerContext) -> pb.GetLakeSnapshotResponse:
        info = self._coordinator.table(codec.path_from_pb(request.table_path))
        snapshot = self._coordinator.lake_snapshot(info.table_id)
        return pb.GetLakeSnapshotResponse(
            table_id=info.table_id, snapshot_id=snapshot.snapshot_id, bucket_snapshots=codec.lake_buckets_to_pb(snapshot)
        )

    @rpc_method
    def CreatePartition(self, request: pb.CreatePartitionRequest, context: grpc.ServicerContext) -> pb.CreatePartitionResponse:
        spec = codec.partition_spec_from_pb(request.partition_spec)
        created = self._coordinator.create_partition(codec.path_from_pb(request.table_path), spec, request.ignore_if_exists)
        return pb.CreatePartitionResponse(partition_id=created.partition_id)

    @rpc_method
    def DropPartition(self, request: pb.DropPartitionRequest, context: grpc.ServicerContext) -> pb.DropPartitionResponse:
        spec = codec.partition_spec_from_pb(request.partition_spec)
        self._coordinator.drop_partition(codec.path_from_pb(request.table_path), spec, request.ignore_if_not_exists)
        return pb.DropPartitionResponse()

    @rpc_method
    def ListPartitionInfos(
        self, request: pb.ListPartitionInfosRequest, context: grpc.ServicerContext
    ) -> pb.ListPartitionInfosResponse:
        partitions = self._coordinator.list_partitions(codec.path_from_pb(request.table_path))
        return pb.ListPartitionInfosResponse(partitions_info=[codec.partition_info_to_pb(p) for p in partitions])

    @rpc_method
    def TieringHeartbeat(self, request: pb.TieringHeartbeatRequest, context: grpc.ServicerContext) -> pb.TieringHeartbeatResponse:
        tables = tuple(codec.path_from_pb(path) for path in request.tables)
        self._coordinator.tiering_heartbeat(request.job_id, tables, request.barrier)
        return pb.TieringHeartbeatResponse()

    @rpc_method
    def GetTieringJobs(self, request: pb.GetTieringJobsRequest, context: grpc.ServicerContext) -> pb.GetTieringJobsResponse:
        jobs = [
            pb.PbTieringJob(
                job_id=job.job_id,
                tables=[codec.path_to_pb(path) for path in job.tables],
                last_barrier=job.last_barrier,
                last_heartbeat_ms=job.last_heartbeat_ms,
            )
            for job in self._coordinator.tiering_jobs()
        ]
        return pb.GetTieringJobsResponse(jobs=jobs)

    @rpc_method
    def AdjustIsr(self, request: pb.AdjustIsrRequest, context: grpc.ServicerContext) -> pb.AdjustIsrResponse:
        copies = self._coordinator.adjust_isr(
            request.leader_id, request.table_id, request.bucket_id, request.leader_epoch, request.isr_version, tuple(request.isr)
        )
        leader = request.leader_id
        return pb.AdjustIsrResponse(bucket=codec.bucket_metadata_to_pb(request.bucket_id, leader, copies))

    @rpc_method
    def InitWriter(self, request: pb.InitWriterRequest, context: grpc.ServicerContext) -> pb.InitWriterResponse:
        identity = self._coordinator.init_writer(self._caller(context))
        return pb.InitWriterResponse(writer_id=identity.writer_id, writer_token=identity.token)

    @rpc_method
    def GetLakeConfig(self, request: pb.GetLakeConfigRequest, context: grpc.ServicerContext) -> pb.GetLakeConfigResponse:
        return codec.lake_config_to_pb(self._coordinator.lake_config().public())

    # consumer groups

    @rpc_method
    def GroupHeartbeat(self, request: pb.GroupHeartbeatRequest, context: grpc.ServicerContext) -> pb.GroupHeartbeatResponse:
        owned = codec.group_buckets_from_pb(request.table_id, request.owned)
        answer = self._groups.heartbeat(
            request.group_id, request.member_id, request.member_epoch, request.table_id, request.session_timeout_ms, owned, request.client_id
        )
        return codec.heartbeat_answer_to_pb(answer)

    @rpc_method
    def CommitGroupOffsets(self, request: pb.CommitGroupOffsetsRequest, context: grpc.ServicerContext) -> pb.CommitGroupOffsetsResponse:
        offsets = codec.group_offsets_from_pb(request.table_id, request.offsets)
        self._groups.commit(request.group_id, request.member_id, request.table_id, offsets)
        return pb.CommitGroupOffsetsResponse()

    @rpc_method
    def ListGroups(self, request: pb.ListGroupsRequest, context: grpc.ServicerContext) -> pb.ListGroupsResponse:
        return pb.ListGroupsResponse(groups=[codec.group_summary_to_pb(summary) for summary in self._groups.list_groups()])

    @rpc_method
    def DescribeGroup(self, request: pb.DescribeGroupRequest, context: grpc.ServicerContext) -> pb.DescribeGroupResponse:
        return codec.group_description_to_pb(self._groups.describe(request.group_id))

    @rpc_method
    def ListGroupOffsets(self, request: pb.ListGroupOffsetsRequest, context: grpc.ServicerContext) -> pb.ListGroupOffsetsResponse:
        offsets = self._groups.offsets(request.group_id, self._coordinator.table_by_id(request.table_id).table_id)
        return pb.ListGroupOffsetsResponse(offsets=codec.group_offsets_to_pb(offsets))

    @rpc_method
    def ResetGroupOffsets(self, request: pb.ResetGroupOffsetsRequest, context: grpc.ServicerContext) -> pb.ResetGroupOffsetsResponse:
        info = self._coordinator.table_by_id(request.table_id)
        offsets = codec.group_offsets_from_pb(info.table_id, request.offsets)
        self._groups.reset(request.group_id, info.table_id, offsets)
        return pb.ResetGroupOffsetsResponse()
