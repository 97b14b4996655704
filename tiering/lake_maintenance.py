"""What ``lakelog lake compact`` and ``lakelog lake expire`` run with: a connection whose lake
reads are off (maintenance works on the lake's own files and metadata), its lake catalog, and a
SparkSession, started only when a compaction needs one.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Mapping

from lakelog.client.connection import connect
from lakelog.config import Configuration
from lakelog.lake.lake_catalog import iceberg_catalog
from lakelog.spark_runtime.spark_session import refuse_local_lake, spark_session
from lakelog.tiering.lake_compaction import LakeCompactor
from lakelog.tiering.snapshot_expiry import SnapshotExpiry

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class LakeMaintenance:
    """``client_config``: client keys plus the job's own ``datalake.iceberg.*`` properties, as for
    ``lakelog tier``. ``spark``: a session to share (tests); else one starts on first compaction."""

    def __init__(
        self,
        bootstrap: str,
        client_config: Mapping[str, Any] | None = None,
        spark_master: str | None = None,
        spark: "SparkSession | None" = None,
        spark_log_level: str = "ERROR",
    ) -> None:
        self.commit_user = f"lakelog-maintenance-{uuid.uuid4().hex[:12]}"
        self._conn = connect(bootstrap, {**Configuration(client_config or {}).items(), "client.lake.enabled": False})
        self.lake_config = self._conn.lake_config()
        self._catalog = iceberg_catalog(self._conn.lake_catalog())
        self._spark_master = spark_master
        self._spark_log_level = spark_log_level
        self._spark = spark
        self._owns_spark = spark is None

    def compactor(self) -> LakeCompactor:
        if self._spark is None:
            master = self._spark_master or self.lake_config.spark_master_for(self._conn.config) or None
            self._spark = spark_session(master, log_level=self._spark_log_level)
            refuse_local_lake(self._spark, self.lake_config)
        return LakeCompactor(self._conn, self._catalog, self._spark, self.lake_config.catalog_properties, self.commit_user)

    def expiry(self) -> SnapshotExpiry:
        return SnapshotExpiry(self._conn.admin, self._catalog)

    def close(self) -> None:
        self._conn.close()
        if self._owns_spark and self._spark is not None:
            self._spark.stop()

    def __enter__(self) -> "LakeMaintenance":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
