"""The coordinator's side of the lake: its configuration and the creation of lake tables.

PyIceberg is imported only when a lake-enabled table is created, so a coordinator that never sees
one runs without it; the catalog, once open, is kept for the next table.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pyarrow as pa

from lakelog.errors import InvalidTableError, LakeError
from lakelog.lake.lake_config import ICEBERG, LakeConfig
from lakelog.metadata import DATALAKE_FORMAT, TableDescriptor, TablePath

if TYPE_CHECKING:
    from lakelog.lake.lake_catalog import LakeCatalog

SUPPORTED_FORMATS = (ICEBERG,)


class LakeTables:
    def __init__(self, config: LakeConfig) -> None:
        self.config = config
        self._catalog: LakeCatalog | None = None
        self._lock = threading.Lock()

    def with_format(self, descriptor: TableDescriptor) -> TableDescriptor:
        """A lake-enabled descriptor with ``table.datalake.format`` filled in from ``datalake.format``."""
        lake_format = descriptor.properties.get(DATALAKE_FORMAT, self.config.format)
        if lake_format not in SUPPORTED_FORMATS:
            raise InvalidTableError(f"{DATALAKE_FORMAT}={lake_format!r} is not supported (use one of {SUPPORTED_FORMATS})")
        return TableDescriptor(
            descriptor.schema, descriptor.buckets, {**descriptor.properties, DATALAKE_FORMAT: lake_format}, descriptor.comment
        )

    def create_table(self, path: TablePath, schema: pa.Schema) -> None:
        """Create the Iceberg table of a lake-enabled table (refusing a schema the lake cannot hold)."""
        try:
            from lakelog.lake.lake_catalog import LakeCatalog
        except ImportError as exc:
            raise LakeError(f"lake-enabled tables need PyIceberg on the coordinator (pip install 'lakelog[lake]'): {exc}") from None
        with self._lock:
            if self._catalog is None:
                self._catalog = LakeCatalog(self.config)
            catalog = self._catalog
        catalog.create_table(path, schema)
