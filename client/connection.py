"""connect(): the entry point of the client."""

from __future__ import annotations

from typing import Any, Mapping

from lakelog.config import Configuration
from lakelog.metadata import TablePath
from lakelog.client.admin import Admin
from lakelog.client.lake.lake_sources import LakeSources
from lakelog.client.metadata import MetadataCache
from lakelog.client.rpc_client import RpcClient
from lakelog.client.table import Table


class Connection:
    """A connection to a lakelog cluster through its coordinator (the bootstrap address)."""

    def __init__(self, bootstrap: str, config: Mapping[str, Any] | None = None) -> None:
        self.config = Configuration(config or {})
        self._rpc = RpcClient(bootstrap, self.config)
        self._metadata = MetadataCache(self._rpc)
        # The admin and every scanner of this connection share one LogSource per table.
        self._lake = LakeSources(self.config, lambda: self.admin.get_lake_config())
        self.admin = Admin(self._rpc, self._metadata, self._lake)

    def get_table(self, path: TablePath) -> Table:
        return Table(self._metadata.table(path), self._rpc, self._metadata, self.admin, self.config, self._lake)

    def close(self) -> None:
        self._rpc.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(bootstrap: str, config: Mapping[str, Any] | None = None) -> Connection:
    return Connection(bootstrap, config)
