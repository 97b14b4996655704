"""The client's view of tables and bucket leaders, refreshed from the coordinator on demand."""

from __future__ import annotations

import threading

from lakelog.errors import NetworkError, TableNotExistError
from lakelog.metadata import ServerNode, TableInfo, TablePath
from lakelog.rpc import codec
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.client.rpc_client import RpcClient


class MetadataCache:
    def __init__(self, rpc: RpcClient) -> None:
        self._rpc = rpc
        self._lock = threading.Lock()
        self._tables: dict[int, TableInfo] = {}
        self._ids: dict[TablePath, int] = {}
        self._leaders: dict[int, dict[int, int]] = {}
        self._servers: dict[int, ServerNode] = {}

    def _load(self, request: pb.MetadataRequest) -> list[TableInfo]:
        response = self._rpc.call(self._rpc.coordinator().GetMetadata, request, f"coordinator {self._rpc.bootstrap}")
        infos = []
        with self._lock:
            self._servers = {n.node_id: codec.node_from_pb(n) for n in response.tablet_servers}
            for message in response.table_metadata:
                info, leaders = codec.table_metadata_from_pb(message)
                self._tables[info.table_id] = info
                self._ids[info.path] = info.table_id
                self._leaders[info.table_id] = leaders
                infos.append(info)
        return infos

    def table(self, path: TablePath) -> TableInfo:
        with self._lock:
            table_id = self._ids.get(path)
            if table_id is not None:
                return self._tables[table_id]
        return self._load(pb.MetadataRequest(table_path=[codec.path_to_pb(path)]))[0]

    def refresh(self, table_id: int) -> TableInfo:
        infos = self._load(pb.MetadataRequest(table_id=[table_id]))
        if not infos:
            raise TableNotExistError(f"table id {table_id} does not exist")
        return infos[0]

    def forget(self, path: TablePath) -> None:
        with self._lock:
            table_id = self._ids.pop(path, None)
            if table_id is not None:
                self._tables.pop(table_id, None)
                self._leaders.pop(table_id, None)

    def tablet_servers(self) -> list[ServerNode]:
        """Every registered tablet server, fresh from the coordinator."""
        self._load(pb.MetadataRequest())
        with self._lock:
            return list(self._servers.values())

    def leader(self, table_id: int, bucket: int) -> ServerNode:
        with self._lock:
            leader_id = self._leaders.get(table_id, {}).get(bucket)
            node = self._servers.get(leader_id) if leader_id is not None else None
        if node is None:
            raise NetworkError(f"no known leader for bucket {bucket} of table id {table_id}")
        return node
