"""Which LogSource, if any, reads a table's lake for this connection (docs/contract.md, "Client API", fallback),
and the connection's lake catalog and barrier snapshots: all through the lake plugin interface
(:mod:`lakelog.log_source`), so the client core knows no lake format.

A table gets one when it is lake-enabled, ``client.lake.enabled`` is true and a plugin for its
``table.datalake.format`` loads. Otherwise the client never sets ``enable_lake`` and behaves as a
client from before lake reads existed; when that is because no plugin loads, one line says why,
once per table, so a user wondering why old offsets are out of range finds the reason.

Plugins get a client config with nothing left to guess: ``client.lake.source=auto`` resolved (the
PySpark ``iceberg`` source when a Spark endpoint is known, the client's own ``lake.spark.master``
or the one the cluster advertises; ``iceberg-arrow`` otherwise, or when PySpark cannot load) and
``lake.spark.master`` filled in from the cluster's when the client has none.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable

from lakelog.config import Configuration
from lakelog.errors import InvalidConfigError, LakeError
from lakelog.lake_plugins import load_lake_storage
from lakelog.lake_config import ICEBERG, PROPERTY_PREFIX, REMOTE_FS_PREFIX, LakeConfig, credentials_from_environment
from lakelog.log_source import LakeCatalogHandle, LakeStorage, LogSource
from lakelog.metadata import DATALAKE_FORMAT, TableInfo, TablePath

log = logging.getLogger(__name__)


AUTO, SPARK_SOURCE, ARROW_SOURCE = "auto", "iceberg", "iceberg-arrow"


def _with(conf: Configuration, values: dict[str, str]) -> Configuration:
    return Configuration({**conf.items(), **values})


class _Unavailable(Exception):
    """Why no plugin can read a format; cached, so it is said once."""


class LakeSources:
    def __init__(
        self,
        conf: Configuration,
        lake_config: Callable[[], LakeConfig],
        load_storage: Callable[[str], LakeStorage] = load_lake_storage,
    ) -> None:
        """``lake_config`` fetches the cluster's lake config (GetLakeConfig); it is called once,
        the first time a lake-enabled table is read. ``load_storage`` finds a format's plugin."""
        self._conf = conf
        self._fetch_lake_config = lake_config
        self._load_storage = load_storage
        self._lake_config: LakeConfig | None = None
        self._plugin_conf: Configuration | None = None
        self._catalog: LakeCatalogHandle | None = None
        self._catalog_lock = threading.Lock()
        self._storages: dict[str, LakeStorage | _Unavailable] = {}
        # By table and schema id: a LogSource reads in the schema of the table info it was made for,
        # and a scanner made after an alter reads in the newer one.
        self._sources: dict[tuple[int, int], LogSource | None] = {}
        self._lock = threading.Lock()

    def log_source(self, info: TableInfo) -> LogSource | None:
        """The table's LogSource; None means: read it without the lake. Errors reaching the
        coordinator are raised (and the next call tries again); a missing plugin is not an error."""
        if not self._conf.get("client.lake.enabled") or not info.lake_enabled:
            return None
        key = (info.table_id, info.schema_id)
        with self._lock:
            if key in self._sources:
                return self._sources[key]
            try:
                source: LogSource | None = self._create(info)
            except _Unavailable as why:
                log.warning("%s: reading without the lake (offsets only the lake holds are out of range): %s", info.path, why)
                source = None
            self._sources[key] = source
            return source

    def _create(self, info: TableInfo) -> LogSource:
        storage = self._storage(info.properties.get(DATALAKE_FORMAT) or ICEBERG)
        conf = self._resolved_conf()
        try:
            return storage.create_log_source(info, self.lake_config(), conf, catalog=self.lake_catalog)
        except ImportError as exc:
            if self._conf.get("client.lake.source") == AUTO and conf.get("client.lake.source") != ARROW_SOURCE:
                log.info("client.lake.source=auto: PySpark cannot load (%s); reading the lake with %s instead", exc, ARROW_SOURCE)
                self._plugin_conf = _with(conf, {"client.lake.source": ARROW_SOURCE})
                return self._create(info)
            raise _Unavailable(f"the {type(storage).__name__} lake plugin cannot load: {exc}") from None

    def _resolved_conf(self) -> Configuration:
        """This client's config with ``auto`` resolved and the advertised Spark filled in; decided
        (and said, for ``auto``) once per connection."""
        if self._plugin_conf is None:
            master = self.lake_config().spark_master_for(self._conf)
            source = self._conf.get("client.lake.source")
            if source == AUTO:
                source = SPARK_SOURCE if master else ARROW_SOURCE
                why = f"Spark at {master}" if master else "no Spark endpoint known (lake.spark.master)"
                log.info("client.lake.source=auto: reading the lake with %s (%s)", source, why)
            self._plugin_conf = _with(self._conf, {"client.lake.source": source, "lake.spark.master": master})
        return self._plugin_conf

    def _storage(self, lake_format: str) -> LakeStorage:
        found = self._storages.get(lake_format)
        if found is None:
            try:
                found = self._load_storage(lake_format)
            except InvalidConfigError as error:
                found = _Unavailable(error.message)
            self._storages[lake_format] = found
        if isinstance(found, _Unavailable):
            raise found
        return found

    def lake_config(self) -> LakeConfig:
        """The cluster's lake config with this client's credentials (``AWS_*`` variables, then its
        own ``datalake.iceberg.*`` keys) on top: the coordinator never hands secrets out."""
        if self._lake_config is None:
            own = {**credentials_from_environment(os.environ), **self._conf.with_prefix(PROPERTY_PREFIX)}
            self._lake_config = self._fetch_lake_config().with_overrides(own)
        return self._lake_config

    def with_remote_settings(self, conf: Configuration) -> Configuration:
        """``conf`` with the cluster's ``remote.fs.*`` settings (endpoint, region) under its own: a
        client reaches remote segments on S3 with nothing but the bootstrap address and credentials."""
        advertised = {f"{REMOTE_FS_PREFIX}{key}": value for key, value in self.lake_config().remote_fs.items()}
        return Configuration({**advertised, **conf.items()}) if advertised else conf

    def lake_catalog(self) -> LakeCatalogHandle:
        """The connection's one lake catalog, opened by the plugin of the cluster's lake format from
        :meth:`lake_config` on first use (the admin and every LogSource of the connection share it)."""
        with self._catalog_lock:
            if self._catalog is None:
                config = self.lake_config()
                self._catalog = self._cluster_storage(config).open_catalog(config)
            return self._catalog

    def barrier_snapshots(self, path: TablePath) -> dict[int, int]:
        """``{barrier: snapshot id}`` of every committed lake snapshot of ``path`` that carries a
        timestamp barrier (docs/contract.md, "Tiering, consistent cuts and cursors"), read from the lake's own snapshot history."""
        return self._cluster_storage(self.lake_config()).barrier_snapshots(self.lake_catalog(), path)

    def _cluster_storage(self, config: LakeConfig) -> LakeStorage:
        """The plugin of the format the cluster tiers into; a missing one is a :class:`LakeError`."""
        try:
            return self._storage(config.format)
        except _Unavailable as why:
            raise LakeError(f"no lake access: {why}") from None

    def close(self) -> None:
        """Close the lake catalog if it was opened (a later :meth:`lake_catalog` opens a new one)."""
        with self._catalog_lock:
            catalog, self._catalog = self._catalog, None
        if catalog is not None:
            catalog.close()
