"""The client's lake access goes through the plugin interface alone: the connection's catalog is the
plugin's, opened once and shared with every LogSource, and barrier snapshots are the plugin's
answer. A small plugin of a made-up format stands in for Iceberg; no server, no socket."""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

import pyarrow as pa
import pytest

from lakelog.client.lake.lake_sources import LakeSources
from lakelog.config import Configuration
from lakelog.errors import InvalidConfigError, LakeError
from lakelog.lake_config import LakeConfig
from lakelog.log_source import FetchContext, LakeCatalogHandle, LakeStorage, LogSource, LookupContext
from lakelog.metadata import DATALAKE_ENABLED, DATALAKE_FORMAT, TableInfo, TablePath

FORMAT = "ledger"
PATH = TablePath("shop", "orders")
INFO = TableInfo(1, PATH, pa.schema([("id", pa.int64())]), 0, 2, {DATALAKE_ENABLED: "true", DATALAKE_FORMAT: FORMAT})


class LedgerCatalog:
    """A catalog that knows each table's barriers and whether it was closed."""

    def __init__(self, barriers: dict[TablePath, dict[int, int]]) -> None:
        self.barriers = barriers
        self.closed = False

    def close(self) -> None:
        self.closed = True


class LedgerSource(LogSource):
    def __init__(self, catalog: Callable[[], LakeCatalogHandle] | None) -> None:
        self.catalog = catalog

    def lookup_log_offset_by_timestamp(self, context: LookupContext) -> int:
        return 0

    def fetch_log_records(self, context: FetchContext) -> Iterator[pa.RecordBatch]:
        return iter(())


class LedgerStorage(LakeStorage):
    def __init__(self, barriers: dict[TablePath, dict[int, int]]) -> None:
        self.barriers = barriers
        self.opened: list[LedgerCatalog] = []

    def create_lake_table(self, path: TablePath, schema: pa.Schema, lake_config: LakeConfig, partition_keys: Sequence[str] = ()) -> None:
        raise AssertionError("a client never creates lake tables")

    def evolve_lake_table(self, path: TablePath, schema: pa.Schema, lake_config: LakeConfig) -> None:
        raise AssertionError("a client never evolves lake tables")

    def create_log_source(
        self, table_info: TableInfo, lake_config: LakeConfig, client_config: Configuration, catalog: Callable[[], LakeCatalogHandle] | None = None
    ) -> LogSource:
        return LedgerSource(catalog)

    def open_catalog(self, lake_config: LakeConfig) -> LedgerCatalog:
        self.opened.append(LedgerCatalog(self.barriers))
        return self.opened[-1]

    def barrier_snapshots(self, catalog: LakeCatalogHandle, path: TablePath) -> dict[int, int]:
        assert isinstance(catalog, LedgerCatalog)
        return catalog.barriers[path]


class CatalogFreeStorage(LedgerStorage):
    """A plugin that keeps the base's answer: no catalog."""

    open_catalog = LakeStorage.open_catalog  # type: ignore[assignment]


class BarrierFreeStorage(LedgerStorage):
    """A plugin with a catalog whose snapshots carry no barrier."""

    barrier_snapshots = LakeStorage.barrier_snapshots  # type: ignore[assignment]


def sources(storage: LakeStorage, lake_format: str = FORMAT) -> LakeSources:
    def load(name: str) -> LakeStorage:
        if name != FORMAT:
            raise InvalidConfigError(f"no lake plugin for format {name!r} is installed")
        return storage

    return LakeSources(Configuration({"client.lake.source": "iceberg-arrow"}), lambda: LakeConfig(format=lake_format), load)


def test_the_catalog_is_the_plugins_opened_once_and_shared_with_every_log_source() -> None:
    storage = LedgerStorage({})
    lake = sources(storage)
    catalog = lake.lake_catalog()
    source = lake.log_source(INFO)
    assert isinstance(source, LedgerSource) and source.catalog is not None
    assert source.catalog() is catalog is lake.lake_catalog()
    assert storage.opened == [catalog]
    lake.close()
    assert catalog.closed
    assert lake.lake_catalog() is not catalog and len(storage.opened) == 2


def test_barrier_snapshots_are_the_plugins_answer_through_the_connections_catalog() -> None:
    lake = sources(LedgerStorage({PATH: {1_700: 5, 1_800: 9}}))
    assert lake.barrier_snapshots(PATH) == {1_700: 5, 1_800: 9}


def test_a_lake_of_a_format_without_plugin_is_a_lake_error_naming_the_format() -> None:
    with pytest.raises(LakeError, match="'parquet-dir'"):
        sources(LedgerStorage({}), "parquet-dir").lake_catalog()


def test_a_plugin_without_catalog_or_barriers_says_so() -> None:
    with pytest.raises(LakeError, match="CatalogFreeStorage lake plugin has no catalog"):
        sources(CatalogFreeStorage({})).lake_catalog()
    with pytest.raises(LakeError, match="BarrierFreeStorage lake plugin does not record timestamp barriers"):
        sources(BarrierFreeStorage({})).barrier_snapshots(PATH)
