"""The coordinator's logic: catalog operations, bucket placement and telling tablet servers what they lead.

Plain Python, no gRPC: the RPC handlers in lakelog.server.rpc call these methods, and tests can too.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Protocol, Sequence

from lakelog.errors import (
    DatabaseAlreadyExistError,
    DatabaseNotEmptyError,
    DatabaseNotExistError,
    NoTabletServerError,
    TableAlreadyExistError,
    TableNotExistError,
)
from lakelog.metadata import ServerNode, TableDescriptor, TableInfo, TablePath, validate_name
from lakelog.server.coordinator.metadata_store import MetadataStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableAssignment:
    """A table and, per bucket, the id of the tablet server that leads it."""

    info: TableInfo
    leaders: dict[int, int]


class TabletNotifier(Protocol):
    """How the coordinator reaches a tablet server (gRPC in production)."""

    def notify_leaders(self, node: ServerNode, tables: Sequence[TableAssignment], dropped: Sequence[int]) -> None: ...


class Coordinator:
    def __init__(self, store: MetadataStore, notifier: TabletNotifier) -> None:
        self._store = store
        self._notifier = notifier
        self._lock = threading.Lock()

    # databases

    def create_database(self, name: str, ignore_if_exists: bool = False, comment: str = "") -> None:
        validate_name("database", name)
        with self._lock:
            if self._store.database_exists(name):
                if ignore_if_exists:
                    return
                raise DatabaseAlreadyExistError(f"database {name!r} already exists")
            self._store.insert_database(name, comment)
        log.info("created database %s", name)

    def drop_database(self, name: str, ignore_if_not_exists: bool = False, cascade: bool = False) -> None:
        validate_name("database", name)
        with self._lock:
            if not self._store.database_exists(name):
                if ignore_if_not_exists:
                    return
                raise DatabaseNotExistError(f"database {name!r} does not exist")
            tables = self._store.tables_in(name)
            if tables and not cascade:
                raise DatabaseNotEmptyError(f"database {name!r} still has {len(tables)} table(s); drop them or cascade")
            for info in tables:
                self._drop(info)
            self._store.delete_database(name)
        log.info("dropped database %s", name)

    def list_databases(self) -> list[str]:
        return self._store.list_databases()

    # tables

    def create_table(self, path: TablePath, descriptor: TableDescriptor, ignore_if_exists: bool = False) -> int:
        descriptor.validate()
        with self._lock:
            if not self._store.database_exists(path.database):
                raise DatabaseNotExistError(f"database {path.database!r} does not exist")
            existing = self._store.table_by_path(path)
            if existing is not None:
                if ignore_if_exists:
                    return existing.table_id
                raise TableAlreadyExistError(f"table {path} already exists")
            servers = self._store.tablet_servers()
            if not servers:
                raise NoTabletServerError(f"cannot create table {path}: no tablet server has registered yet")
            start = len(self._store.all_tables())
            leaders = {b: servers[(start + b) % len(servers)].server_id for b in range(descriptor.buckets)}
            info = self._store.insert_table(path, descriptor, leaders)
        log.info("created table %s (id %d, %d buckets, leaders %s)", path, info.table_id, info.buckets, leaders)
        self._tell_leaders([TableAssignment(info, leaders)], [])
        return info.table_id

    def drop_table(self, path: TablePath, ignore_if_not_exists: bool = False) -> None:
        with self._lock:
            info = self._store.table_by_path(path)
            if info is None:
                if ignore_if_not_exists:
                    return
                raise TableNotExistError(f"table {path} does not exist")
            self._drop(info)

    def _drop(self, info: TableInfo) -> None:
        self._store.delete_table(info.table_id)
        log.info("dropped table %s (id %d)", info.path, info.table_id)
        self._tell_leaders([], [info.table_id])

    def list_tables(self, database: str) -> list[str]:
        validate_name("database", database)
        if not self._store.database_exists(database):
            raise DatabaseNotExistError(f"database {database!r} does not exist")
        return [info.path.table for info in self._store.tables_in(database)]

    def table(self, path: TablePath) -> TableInfo:
        info = self._store.table_by_path(path)
        if info is None:
            raise TableNotExistError(f"table {path} does not exist")
        return info

    def table_by_id(self, table_id: int) -> TableInfo:
        info = self._store.table_by_id(table_id)
        if info is None:
            raise TableNotExistError(f"table id {table_id} does not exist")
        return info

    def assignment(self, info: TableInfo) -> TableAssignment:
        return TableAssignment(info, self._store.leaders(info.table_id))

    def tablet_servers(self) -> list[ServerNode]:
        return self._store.tablet_servers()

    # tablet servers

    def register_tablet_server(self, node: ServerNode) -> list[TableAssignment]:
        """Record a (re)starting tablet server and return every bucket it leads."""
        self._store.upsert_tablet_server(node)
        led = []
        for info in self._store.all_tables():
            leaders = self._store.leaders(info.table_id)
            if node.server_id in leaders.values():
                led.append(TableAssignment(info, leaders))
        log.info("tablet server %d registered at %s, leading buckets of %d table(s)", node.server_id, node.address, len(led))
        return led

    def _tell_leaders(self, tables: Sequence[TableAssignment], dropped: Sequence[int]) -> None:
        """Best effort: a tablet server that misses this learns its buckets on its next request or restart."""
        for node in self._store.tablet_servers():
            mine = [t for t in tables if node.server_id in t.leaders.values()]
            if not mine and not dropped:
                continue
            try:
                self._notifier.notify_leaders(node, mine, dropped)
            except Exception as exc:  # noqa: BLE001 - any failure here is retried by the tablet server itself
                log.warning("could not notify tablet server %d at %s: %s", node.server_id, node.address, exc)
