"""The ``iceberg`` lake plugin (entry point ``lakelog.lake_storage`` = ``iceberg``).

The coordinator creates lake tables through it, in one catalog it keeps open, and reads their
numbers (data files, small files, snapshots, last compaction) for its metrics and status page. A
client opens its connection's catalog through it and reads which snapshots carry a barrier.

``client.lake.source`` picks the LogSource (the client resolves ``auto`` before it gets here):
``iceberg`` reads through PySpark, ``iceberg-arrow`` in-process. Each is imported only when chosen, so a client without PySpark can
still use ``iceberg-arrow``, and a missing library surfaces as the ImportError that makes the
client fall back to reading without the lake.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Sequence

import pyarrow as pa

from lakelog.config import Configuration
from lakelog.lake_config import LakeConfig
from lakelog.log_source import LakeCatalogHandle, LakeStorage, LakeTableStats, LogSource
from lakelog.metadata import TableInfo, TablePath

if TYPE_CHECKING:
    from lakelog.lake.lake_catalog import LakeCatalog
    from lakelog.lake.lake_table_stats import LakeTableStatsCache


class IcebergLakeStorage(LakeStorage):
    def __init__(self) -> None:
        self._catalog: LakeCatalog | None = None
        self._stats: LakeTableStatsCache | None = None
        self._lock = threading.Lock()

    def create_lake_table(self, path: TablePath, schema: pa.Schema, lake_config: LakeConfig, partition_keys: Sequence[str] = ()) -> None:
        self._catalog_of(lake_config).create_table(path, schema, partition_keys)

    def evolve_lake_table(self, path: TablePath, schema: pa.Schema, lake_config: LakeConfig) -> None:
        self._catalog_of(lake_config).evolve_table(path, schema)

    def table_stats(self, path: TablePath, lake_config: LakeConfig, target_file_size: int) -> LakeTableStats:
        from lakelog.lake.lake_catalog import lake_call
        from lakelog.lake.lake_table_stats import LakeTableStatsCache

        catalog = self._catalog_of(lake_config)
        with self._lock:
            if self._stats is None:
                self._stats = LakeTableStatsCache()
            stats = self._stats
        return lake_call(f"cannot read the numbers of {path}'s lake table", lambda: stats.stats(catalog.load_table(path), target_file_size))

    def _catalog_of(self, lake_config: LakeConfig) -> "LakeCatalog":
        with self._lock:
            if self._catalog is None:
                self._catalog = self.open_catalog(lake_config)
            return self._catalog

    def open_catalog(self, lake_config: LakeConfig) -> "LakeCatalog":
        # Imported here: the plugin must load (and say what is missing) without PyIceberg.
        from lakelog.lake.lake_catalog import LakeCatalog

        return LakeCatalog(lake_config)

    def barrier_snapshots(self, catalog: LakeCatalogHandle, path: TablePath) -> dict[int, int]:
        from lakelog.lake.lake_catalog import iceberg_catalog, lake_call
        from lakelog.lake.snapshot_summary import barrier_snapshots

        table = iceberg_catalog(catalog).load_table(path)
        return lake_call(f"cannot read the barriers of {path}'s lake table", lambda: barrier_snapshots(table))

    def create_log_source(
        self,
        table_info: TableInfo,
        lake_config: LakeConfig,
        client_config: Configuration,
        catalog: "Callable[[], LakeCatalog] | None" = None,
    ) -> LogSource:
        if client_config.get("client.lake.source") == "iceberg-arrow":
            from lakelog.lake.iceberg_arrow_log_source import IcebergArrowLogSource

            return IcebergArrowLogSource(table_info, lake_config, client_config, catalog)
        from lakelog.lake.iceberg_spark_log_source import IcebergSparkLogSource

        return IcebergSparkLogSource(table_info, lake_config, client_config, catalog)
