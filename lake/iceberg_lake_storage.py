"""The ``iceberg`` lake plugin (entry point ``lakelog.lake_storage`` = ``iceberg``).

``client.lake.source`` picks the LogSource: ``iceberg`` (default) reads through PySpark,
``iceberg-arrow`` in-process. Each is imported only when chosen, so a client without PySpark can
still use ``iceberg-arrow``, and a missing library surfaces as the ImportError that makes the
client fall back to reading without the lake.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from lakelog.client.lake.log_source import LakeStorage, LogSource
from lakelog.config import Configuration
from lakelog.lake.lake_config import LakeConfig
from lakelog.metadata import TableInfo

if TYPE_CHECKING:
    from lakelog.lake.lake_catalog import LakeCatalog


class IcebergLakeStorage(LakeStorage):
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
