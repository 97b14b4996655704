"""The coordinator's side of the lake: its configuration and the creation of lake tables.

Lake tables are created by the lake plugin of the table's format (:mod:`lakelog.lake_plugins`),
loaded when the first lake-enabled table is created, so a coordinator that never sees one runs
without PyIceberg; the plugin, and the catalog it opens, are kept for the next table.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Callable, Sequence, TypeVar

import pyarrow as pa

from lakelog.errors import InvalidTableError, LakeError
from lakelog.lake_config import ICEBERG, LakeConfig
from lakelog.lake_plugins import load_lake_storage
from lakelog.log_source import LakeStorage, LakeTableStats
from lakelog.metadata import DATALAKE_FORMAT, TableDescriptor, TableInfo, TablePath
from lakelog.server.coordinator.table_properties import TARGET_FILE_SIZE, table_property

SUPPORTED_FORMATS = (ICEBERG,)

Result = TypeVar("Result")


class LakeTables:
    def __init__(self, config: LakeConfig) -> None:
        self.config = config
        self._storage: LakeStorage | None = None
        self._lock = threading.Lock()

    def with_format(self, descriptor: TableDescriptor) -> TableDescriptor:
        """A lake-enabled descriptor with ``table.datalake.format`` filled in from ``datalake.format``."""
        lake_format = descriptor.properties.get(DATALAKE_FORMAT, self.config.format)
        if lake_format not in SUPPORTED_FORMATS:
            raise InvalidTableError(f"{DATALAKE_FORMAT}={lake_format!r} is not supported (use one of {SUPPORTED_FORMATS})")
        return dataclasses.replace(descriptor, properties={**descriptor.properties, DATALAKE_FORMAT: lake_format})

    def create_table(self, path: TablePath, schema: pa.Schema, partition_keys: Sequence[str] = ()) -> None:
        """Create the lake table of a lake-enabled table (refusing a schema the lake cannot hold),
        partitioned by the table's partition keys, then by bucket."""
        self._with_storage(lambda storage: storage.create_lake_table(path, schema, self.config, partition_keys))

    def evolve_table(self, path: TablePath, schema: pa.Schema) -> None:
        """Bring the lake table to the log table's altered ``schema``."""
        self._with_storage(lambda storage: storage.evolve_lake_table(path, schema, self.config))

    def stats(self, info: TableInfo) -> LakeTableStats | None:
        """The numbers of a lake-enabled table's lake table (None: its format does not tell them).
        Raises :class:`LakeError` when the catalog or its files cannot be read."""
        target = table_property(str(info.path), info.properties, TARGET_FILE_SIZE)
        return self._with_storage(lambda storage: storage.table_stats(info.path, self.config, target))

    def _with_storage(self, call: Callable[[LakeStorage], Result]) -> Result:
        with self._lock:
            if self._storage is None:
                self._storage = load_lake_storage(self.config.format)
            storage = self._storage
        try:
            return call(storage)
        except ImportError as exc:
            raise LakeError(f"lake-enabled tables need PyIceberg on the coordinator (pip install 'lakelog[lake]'): {exc}") from None
