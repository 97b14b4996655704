"""The client's view of tables and bucket leaders, refreshed from the coordinator on demand."""

from __future__ import annotations

import threading

from lakelog.errors import NotLeaderError, TableNotExistError
from lakelog.cluster_state import ServerNode
from lakelog.metadata import TableInfo, TablePath
from lakelog.client.rpc.coordinator_gateway import CoordinatorGateway
from lakelog.client.rpc.messages import ClusterMetadata


class MetadataCache:
    def __init__(self, coordinator: CoordinatorGateway) -> None:
        self._coordinator = coordinator
        self._lock = threading.Lock()
        self._tables: dict[int, TableInfo] = {}
        self._ids: dict[TablePath, int] = {}
        self._leaders: dict[int, dict[int, int]] = {}
        self._partitions: dict[int, dict[str, TableInfo]] = {}
        self._servers: dict[int, ServerNode] = {}
        self._unavailable: frozenset[int] = frozenset()

    def _load(self, metadata: ClusterMetadata) -> list[TableInfo]:
        """Store what the coordinator answered. Tables and partitions are kept by physical id; a
        partitioned table's answer lists every partition it has now, which replaces the ones known."""
        with self._lock:
            self._servers = dict(metadata.servers)
            self._unavailable = metadata.unavailable
            for assignment in metadata.tables:
                info = assignment.info
                self._tables[info.physical_id] = info
                self._leaders[info.physical_id] = dict(assignment.leaders)
                if info.partition_id is None:
                    self._ids[info.path] = info.table_id
                    if info.partitioned:
                        self._partitions[info.table_id] = {}
                else:
                    self._partitions.setdefault(info.table_id, {})[info.partition_name] = info
        return [assignment.info for assignment in metadata.tables]

    def table(self, path: TablePath, refresh: bool = False) -> TableInfo:
        """The table at ``path`` as last loaded (``refresh``: loaded now, so a table dropped and
        created again under its path is found under its new id)."""
        if not refresh:
            with self._lock:
                table_id = self._ids.get(path)
                if table_id is not None:
                    return self._tables[table_id]
        return self._load(self._coordinator.get_metadata(paths=[path]))[0]

    def refresh(self, table_id: int) -> TableInfo:
        infos = self._load(self._coordinator.get_metadata(table_ids=[table_id]))
        if not infos:
            raise TableNotExistError(f"table id {table_id} does not exist")
        return infos[0]

    def partitions(self, info: TableInfo, refresh: bool = False) -> dict[str, TableInfo]:
        """A partitioned table's partitions by name, as last loaded (``refresh``: loaded now)."""
        if refresh or info.table_id not in self._partitions:
            self._load(self._coordinator.get_metadata(paths=[info.path]))
        with self._lock:
            return dict(self._partitions.get(info.table_id, {}))

    def forget(self, path: TablePath) -> None:
        with self._lock:
            table_id = self._ids.pop(path, None)
            if table_id is not None:
                self._tables.pop(table_id, None)
                self._leaders.pop(table_id, None)
                for partition in self._partitions.pop(table_id, {}).values():
                    self._tables.pop(partition.physical_id, None)
                    self._leaders.pop(partition.physical_id, None)

    def tablet_servers(self) -> list[ServerNode]:
        """Every registered tablet server, fresh from the coordinator."""
        self._load(self._coordinator.get_metadata())
        with self._lock:
            return list(self._servers.values())

    def available(self, server_id: int) -> bool:
        """False when the coordinator, at the last refresh, said the server stopped heartbeating."""
        with self._lock:
            return server_id not in self._unavailable

    def leader(self, table_id: int, bucket: int) -> ServerNode:
        with self._lock:
            leader_id = self._leaders.get(table_id, {}).get(bucket)
            node = self._servers.get(leader_id) if leader_id is not None else None
        if node is None:
            raise NotLeaderError(f"no known leader for bucket {bucket} of table id {table_id}")
        return node
