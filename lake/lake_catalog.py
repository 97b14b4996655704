"""The Iceberg catalog of a lake: opening it from a :class:`LakeConfig`, creating and loading the
lake tables of lakelog tables.

Catalog and storage failures become :class:`LakeError` (retriable: the catalog or the object store
may be back later); a schema the lake cannot hold is an :class:`InvalidTableError`.
"""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

import pyarrow as pa
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.table import Table

from lakelog.errors import InvalidTableError, LakeError, LakelogError
from lakelog.lake_config import ICEBERG, LakeConfig
from lakelog.log_source import LakeCatalogHandle
from lakelog.lake.schema_mapping import lake_schema
from lakelog.lake.table_layout import TABLE_PROPERTIES, identifier, partition_spec, sort_order
from lakelog.metadata import TablePath

Result = TypeVar("Result")

# A Spark or Py4J error carries a whole stack trace; its head says enough.
MAX_CAUSE_CHARS = 2000


def lake_call(what: str, call: Callable[[], Result]) -> Result:
    """Run a lake call (catalog, object store, Spark); anything but a lakelog error becomes a
    :class:`LakeError` saying what failed (the cause's text cut at :data:`MAX_CAUSE_CHARS`)."""
    try:
        return call()
    except LakelogError:
        raise
    except Exception as exc:  # noqa: BLE001 - PyIceberg, SQLAlchemy, pyarrow, boto and Py4J raise many types
        raise LakeError(f"{what}: {type(exc).__name__}: {str(exc)[:MAX_CAUSE_CHARS]}") from exc


class LakeCatalog:
    def __init__(self, config: LakeConfig) -> None:
        if config.format != ICEBERG:
            raise LakeError(f"lake format {config.format!r} is not supported (only {ICEBERG!r})")
        config.refuse_if_elsewhere()
        self.config = config
        sqlite = config.default_sqlite_path
        if sqlite is not None:
            sqlite.parent.mkdir(parents=True, exist_ok=True)
        self.catalog: Catalog = lake_call(
            "cannot open the Iceberg catalog", lambda: load_catalog(config.catalog_name, **config.catalog_properties)
        )

    def create_table(self, path: TablePath, log_schema: pa.Schema, partition_keys: Sequence[str] = ()) -> Table:
        """Create the lake table of ``path`` (the schema is checked first, before the catalog is
        touched), partitioned by ``partition_keys`` then by bucket.

        An existing lake table is reused only while it holds no snapshot and has exactly this schema:
        what is left of an earlier attempt whose lakelog table was never created. Anything else
        would mix the offsets of two different tables, so it is refused.
        """
        schema = lake_schema(log_schema, str(path))
        ident = identifier(path)

        def create() -> Table:
            self.catalog.create_namespace_if_not_exists(path.database)
            if not self.catalog.table_exists(ident):
                return self.catalog.create_table(
                    ident,
                    schema=schema,
                    partition_spec=partition_spec(schema, partition_keys),
                    sort_order=sort_order(schema),
                    properties=TABLE_PROPERTIES,
                )
            existing = self.catalog.load_table(ident)
            same_schema = schema_to_pyarrow(existing.schema(), include_field_ids=False) == schema_to_pyarrow(
                schema, include_field_ids=False
            )
            same_schema = same_schema and existing.spec() == partition_spec(schema, partition_keys)
            if existing.current_snapshot() is not None or not same_schema:
                raise InvalidTableError(
                    f"table {path}: the Iceberg catalog already has a lake table {'.'.join(ident)}"
                    f" ({'with data' if same_schema else 'with another schema'}); drop it from the catalog first"
                )
            return existing

        return lake_call(f"cannot create lake table {path}", create)

    def evolve_table(self, path: TablePath, log_schema: pa.Schema) -> None:
        """Add the columns ``log_schema`` has and the lake table lacks, and widen those it widened,
        by name: field ids stay, so every data file written before reads in the new schema (a
        column it lacks as null). Nothing changes when the lake table has the schema already."""
        wanted = lake_schema(log_schema, str(path))
        table = self.load_table(path)

        def evolve() -> None:
            with table.update_schema() as update:
                update.union_by_name(wanted)

        lake_call(f"cannot evolve lake table {path}", evolve)

    def load_table(self, path: TablePath) -> Table:
        def load() -> Table:
            try:
                return self.catalog.load_table(identifier(path))
            except NoSuchTableError:
                raise LakeError(f"table {path} has no lake table {'.'.join(identifier(path))} in the Iceberg catalog") from None

        return lake_call(f"cannot load lake table {path}", load)

    def close(self) -> None:
        """Release the catalog's connections: its own ``close`` where it has one, else the SQL
        catalog's engine is disposed. Closing twice is harmless; the catalog is unusable after."""
        close = getattr(self.catalog, "close", None)
        if callable(close):
            close()
            return
        engine = getattr(self.catalog, "engine", None)
        dispose = getattr(engine, "dispose", None)
        if callable(dispose):
            dispose()


def iceberg_catalog(handle: LakeCatalogHandle) -> LakeCatalog:
    """A connection's lake catalog (``Connection.lake_catalog()``, opened by the lake plugin) as the
    Iceberg catalog the Iceberg code works through; a lake of another format is refused."""
    if not isinstance(handle, LakeCatalog):
        raise LakeError(f"the lake's catalog is a {type(handle).__name__}, not lakelog's Iceberg catalog: this needs an iceberg lake")
    return handle
