"""The lake plugin interface (docs/contract.md, "Client API"): a :class:`LakeStorage`, found through the entry-point
group ``lakelog.lake_storage`` by a table's ``table.datalake.format`` (see
:mod:`lakelog.lake_plugins`), creates the lake table for the coordinator, opens the lake's catalog
for a connection, reads which lake snapshots carry a timestamp barrier, and creates a
:class:`LogSource` that serves a client the offsets only the lake holds. The client talks to the
lake through this interface only.

Kept free of PyIceberg and PySpark so that a plain client and a server import it, and a plugin
depends on lakelog's types only: it is handed contexts and gives Arrow record batches back.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol, Sequence

import pyarrow as pa

from lakelog.config import Configuration
from lakelog.errors import LakeError
from lakelog.lake_config import LakeConfig
from lakelog.metadata import TableInfo, TablePath


@dataclass(frozen=True, slots=True)
class LookupContext:
    """Find the first offset of ``bucket`` whose commit timestamp is >= ``timestamp`` (ms) in lake
    snapshot ``lake_snapshot_id``; ``partition_name`` is empty for a table without partitions."""

    partition_name: str
    bucket: int
    timestamp: int
    lake_snapshot_id: int


@dataclass(frozen=True, slots=True)
class FetchContext:
    """Read offsets ``[fetch_start_offset, log_end_offset_of_snapshot)`` of ``bucket`` from lake
    snapshot ``lake_snapshot_id``. ``projection`` holds column indexes into the table's schema, in
    the order the scanner wants them (None: every column)."""

    fetch_start_offset: int
    log_end_offset_of_snapshot: int
    partition_name: str
    bucket: int
    lake_snapshot_id: int
    projection: Sequence[int] | None


@dataclass(frozen=True, slots=True)
class LakeTableStats:
    """What a lake table holds, as numbers: data files of its current snapshot and how many of them
    are small (below the share of ``table.datalake.target-file-size`` compaction merges), snapshots
    kept, and when a compaction last committed (ms; None: never, or expired since)."""

    data_files: int
    small_files: int
    snapshots: int
    last_compaction_ms: int | None

    @property
    def small_file_share(self) -> float:
        return self.small_files / self.data_files if self.data_files else 0.0


class LakeCatalogHandle(Protocol):
    """A lake format's own catalog, opened for one connection: its LogSources share it, the Spark
    jobs (tiering, maintenance) work through it, and the connection closes it."""

    def close(self) -> None: ...


class LogSource(ABC):
    """Reads one table's records back from the lake, as the log would have served them."""

    @abstractmethod
    def lookup_log_offset_by_timestamp(self, context: LookupContext) -> int:
        """The first offset whose timestamp is >= ``context.timestamp``. Raises
        :class:`~lakelog.errors.InvalidTimestampError` when the timestamp is past the snapshot's
        largest one (the log's own tiers answer then)."""

    @abstractmethod
    def fetch_log_records(self, context: FetchContext) -> Iterator[pa.RecordBatch]:
        """Batches of the projected columns followed by ``__bucket`` (int32), ``__offset`` (int64)
        and ``__timestamp`` (int64 ms), in offset order from ``fetch_start_offset`` on, each offset
        once. Called on a background thread; the client stops iterating once it has the range and
        closes the iterator when the reader goes away. Raises :class:`~lakelog.errors.LakeError`
        when the catalog or the warehouse cannot be read."""


class LakeStorage(ABC):
    """One lake format (``table.datalake.format``); instantiated once per connection and once
    per coordinator."""

    @abstractmethod
    def create_lake_table(self, path: TablePath, schema: pa.Schema, lake_config: LakeConfig, partition_keys: Sequence[str] = ()) -> None:
        """Create the lake table of a new lake-enabled table (the coordinator's call), partitioned
        by the table's ``partition_keys`` when it has any. Raises
        :class:`~lakelog.errors.InvalidTableError` for a schema the lake cannot hold, and
        ImportError when a library it needs is missing."""

    @abstractmethod
    def evolve_lake_table(self, path: TablePath, schema: pa.Schema, lake_config: LakeConfig) -> None:
        """Bring the lake table of ``path`` to the log table's new ``schema`` (the coordinator's call
        as it alters a table): added columns added, widened ones widened, field ids kept. Doing it
        again is harmless."""

    @abstractmethod
    def create_log_source(
        self,
        table_info: TableInfo,
        lake_config: LakeConfig,
        client_config: Configuration,
        catalog: Callable[[], LakeCatalogHandle] | None = None,
    ) -> LogSource:
        """A LogSource for ``table_info``. ``lake_config`` is the cluster's (GetLakeConfig) with the
        client's own credentials on top; ``catalog`` returns the connection's one lake catalog
        (from :meth:`open_catalog`, opened on its first call, closed with the connection),
        which the LogSource should use rather than open its own. Raises ImportError when a library
        it needs is missing: the client then reads the table as a client without the lake."""

    def open_catalog(self, lake_config: LakeConfig) -> LakeCatalogHandle:
        """The lake's catalog as ``lake_config`` names it, opened for one connection (which passes
        it back to :meth:`create_log_source` and :meth:`barrier_snapshots`). Raises ImportError
        when a library it needs is missing; the base refuses, for a format without a catalog."""
        raise LakeError(f"the {type(self).__name__} lake plugin has no catalog to open")

    def barrier_snapshots(self, catalog: LakeCatalogHandle, path: TablePath) -> dict[int, int]:
        """``{barrier: snapshot id}`` of every committed snapshot of ``path``'s lake table that
        carries a timestamp barrier (docs/contract.md, "Tiering, consistent cuts and cursors"), read
        from the lake's own history through ``catalog`` (from :meth:`open_catalog`). The base
        refuses, for a format whose snapshots carry no barrier."""
        raise LakeError(f"the {type(self).__name__} lake plugin does not record timestamp barriers")

    def table_stats(self, path: TablePath, lake_config: LakeConfig, target_file_size: int) -> LakeTableStats | None:
        """The numbers of ``path``'s lake table (the coordinator's metrics and status page); None
        from a format that does not tell them."""
        return None
