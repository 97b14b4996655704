"""connect(): the entry point of the client."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from lakelog.config import Configuration, parse_addresses
from lakelog.errors import InvalidConfigError
from lakelog.lake_config import LakeConfig
from lakelog.metadata import TablePath
from lakelog.rpc.rpc_edge import RpcEdge
from lakelog.client.admin import Admin
from lakelog.client.barrier_hold import BarrierHold
from lakelog.client.internal_admin import InternalAdmin
from lakelog.client.lake.lake_sources import LakeSources
from lakelog.client.metadata_cache import MetadataCache
from lakelog.client.rpc.coordinator_gateway import CoordinatorGateway
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.retry_policy import TRANSPORT_ERRORS, RetryPolicy
from lakelog.client.rpc.tablet_gateway import TabletGateway
from lakelog.client.sender import Sender
from lakelog.client.table import Table

if TYPE_CHECKING:
    from lakelog.log_source import LakeCatalogHandle


class Connection:
    """A connection to a lakelog cluster through its coordinator: ``bootstrap`` is its address, or
    several (a list, or ``"h1:9123,h2:9123"``), of which any live one will do; without it,
    ``bootstrap.servers`` from ``config``."""

    def __init__(self, bootstrap: str | Sequence[str] | None = None, config: Mapping[str, Any] | None = None) -> None:
        self.config = Configuration(config or {})
        try:
            addresses = parse_addresses(bootstrap) if bootstrap else self.config.get("bootstrap.servers")
        except ValueError as exc:
            raise InvalidConfigError(f"bootstrap address: {exc}") from None
        self._edge = RpcEdge(self.config)
        coordinator = CoordinatorGateway(self._edge, addresses)
        self._tablets = TabletGateway(self._edge)
        self._router = LeaderRouter(MetadataCache(coordinator), RetryPolicy.from_config(self.config), self._edge.timeout_s)
        # The admin and every scanner of this connection share one LogSource per table.
        self._lake = LakeSources(self.config, lambda: self.admin.get_lake_config())
        self.admin = Admin(coordinator, self._tablets, self._router, self._lake)
        # lakelog's own calls (writer ids, the tiering job's protocol), apart from the user's admin.
        self.internal_admin = InternalAdmin(coordinator, self._tablets, self._router)
        self._sender = Sender(self._tablets, self._router, self.config.get("client.writer.max-inflight"), self.config.get("client.writer.acks"))

    def get_table(self, path: TablePath) -> Table:
        """A handle on the table at ``path``, looked up on the coordinator (as Fluss's
        ``getTable``), so a table dropped and created again is found under its new id; while the
        coordinator cannot be reached, the table as this connection last knew it (a connection
        that knew nothing of it waits for the coordinator as any lookup does). A handle taken
        before its table was dropped keeps naming the dropped one."""
        metadata = self._router.metadata
        try:
            info = metadata.table(path, refresh=True)
        except TRANSPORT_ERRORS:
            info = self._router.call(lambda: metadata.table(path), f"look up table {path}", resend_safe=True)
        return Table(info, self._tablets, self._router, self.admin, self.internal_admin, self.config, self._sender, self._lake)

    def open_barrier_hold(self, timeout_ms: int | None = None) -> BarrierHold:
        """A barrier hold on every tablet server (see :mod:`lakelog.client.barrier_hold`): writers
        created with it are never split by a consistent lake cut. The servers drop a hold left open
        past ``timeout_ms`` (default ``client.barrier-hold.timeout``)."""
        timeout = self.config.get("client.barrier-hold.timeout") if timeout_ms is None else timeout_ms
        return BarrierHold(self._tablets, self._router, timeout)

    def lake_config(self) -> LakeConfig:
        """The cluster's lake config (GetLakeConfig, fetched once) with this connection's own
        credentials on top: ``AWS_*`` environment variables, then its ``datalake.iceberg.*`` keys."""
        return self._lake.lake_config()

    def lake_catalog(self) -> "LakeCatalogHandle":
        """The connection's lake catalog, the lake plugin's own catalog object (for ``iceberg``,
        lakelog's Iceberg catalog): opened by the plugin on first use, closed by :meth:`close`."""
        return self._lake.lake_catalog()

    def close(self) -> None:
        """Writers left open fail what they still hold (their ``flush()`` raises)."""
        try:
            self._sender.close()
            self._lake.close()
        finally:
            self._edge.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(bootstrap: str | Sequence[str] | None = None, config: Mapping[str, Any] | None = None) -> Connection:
    return Connection(bootstrap, config)
