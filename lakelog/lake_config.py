"""Which lake a cluster tiers into: the format and the PyIceberg catalog properties, and the Spark
(``lake.spark.master``) that reads and tiers it.

The servers read it from ``datalake.format`` and ``datalake.iceberg.*``; the coordinator hands the
non-secret part to clients and tiering jobs (GetLakeConfig), together with its remote-storage
settings (``remote.fs.*``: endpoint, region) and the machine it runs on, so they need only the
bootstrap address and add their own credentials (AWS environment variables, ``--set
datalake.iceberg.*``). A catalog or warehouse local to the servers' machine (the embedded default:
a SQLite file and a ``file://`` warehouse) is refused where it cannot be the same one: on another
machine, and in Spark tasks of a cluster. This module imports no PyIceberg: a plain client and a
server with no lake table never need it.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping
from urllib.parse import urlsplit, urlunsplit

from lakelog.config import Configuration
from lakelog.errors import InvalidConfigError

ICEBERG = "iceberg"
PROPERTY_PREFIX = "datalake.iceberg."
CATALOG_NAME = "lakelog"
REMOTE_FS_PREFIX = "remote.fs."
# Overrides this machine's identity: containers that share the servers' files (same paths) say so.
HOST_ID_ENV = "LAKELOG_HOST_ID"
_MACHINE_ID = Path("/etc/machine-id")
_SECRET_WORDS = re.compile(r"secret|password|token|credential|key", re.IGNORECASE)
# Names that carry one of those words but only say where something is, never how to get in.
_LOCATION_SUFFIXES = (".endpoint", ".uri", "-uri", ".region", ".url", "-url")
# A job's own S3 credentials, from the variables every AWS tool reads.
_AWS_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "s3.access-key-id",
    "AWS_SECRET_ACCESS_KEY": "s3.secret-access-key",
    "AWS_SESSION_TOKEN": "s3.session-token",
}


def is_secret(key: str) -> bool:
    """A catalog property the coordinator never sends: access keys, passwords, tokens, credentials."""
    return bool(_SECRET_WORDS.search(key)) and not key.lower().endswith(_LOCATION_SUFFIXES)


def credentials_from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """S3 catalog properties from ``AWS_*`` variables. Passed on explicitly, they reach Spark
    workers that do not share the job's environment (a cluster, a session started earlier)."""
    return {prop: environ[var] for var, prop in _AWS_ENVIRONMENT.items() if environ.get(var)}


def _without_password(value: str) -> str:
    """``postgresql://user:pw@host/db`` -> ``postgresql://user@host/db``: a catalog URI stays usable
    as a location while its password stays on the server."""
    if "://" not in value:
        return value
    parts = urlsplit(value)
    if parts.password is None:
        return value
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _without_secret_parameters(master: str) -> str:
    """``sc://host:15002/;token=…;user_id=x`` -> ``sc://host:15002/;user_id=x``: a Spark Connect
    address leaves the server without the parameters that hold a secret."""
    base, *parameters = master.split(";")
    return ";".join([base, *(p for p in parameters if not is_secret(p.partition("=")[0]))])


def this_host() -> str:
    """This machine: ``$LAKELOG_HOST_ID``, else its hostname and a digest of its machine id
    (containers of one image share a machine id but not a hostname). The coordinator hands it to
    every client, and machine-id(5) asks that the raw id never leave the machine, so only an
    application-keyed hash of it does."""
    own = os.environ.get(HOST_ID_ENV)
    if own:
        return own
    try:
        machine = _MACHINE_ID.read_bytes().strip()
    except OSError:
        machine = b""
    digest = hashlib.sha256(b"lakelog host:" + machine).hexdigest()[:16] if machine else ""
    return f"{socket.gethostname()}/{digest}"


def _is_local_location(value: str) -> bool:
    """A SQLite catalog, a ``file://`` URI or a bare path: only the machine that has the file sees it."""
    return value.startswith(("sqlite:", "file:")) or "://" not in value


@dataclass(frozen=True)
class LakeConfig:
    """``format`` (``iceberg``), the PyIceberg catalog properties (``type``, ``uri``, ``warehouse``,
    ``s3.endpoint``, ...); ``spark_master``, the coordinator's ``lake.spark.master`` ('' when unset);
    ``remote_fs``, the servers' ``remote.fs.*`` settings without the prefix; ``server_host``, the
    machine (:func:`this_host`) whose files a local catalog or warehouse are; ``catalog_name``, the
    name the catalog is loaded under (``datalake.catalog-name``)."""

    format: str = ICEBERG
    catalog_properties: Mapping[str, str] = field(default_factory=dict)
    spark_master: str = ""
    remote_fs: Mapping[str, str] = field(default_factory=dict)
    server_host: str = ""
    catalog_name: str = CATALOG_NAME

    @classmethod
    def from_configuration(cls, conf: Configuration, data_dir: Path) -> "LakeConfig":
        """The server's lake. With no catalog configured: a SQLite catalog at
        ``<data-dir>/lake/catalog.db``; with no warehouse for it: ``<data-dir>/lake/warehouse``."""
        properties = conf.with_prefix(PROPERTY_PREFIX)
        lake_dir = data_dir.resolve() / "lake"
        if properties.get("type", "sql") == "sql" and "uri" not in properties:
            properties.setdefault("type", "sql")
            properties["uri"] = f"sqlite:///{lake_dir / 'catalog.db'}"
            properties.setdefault("warehouse", (lake_dir / "warehouse").as_uri())
        return cls(conf.get("datalake.format"), properties, conf.get("lake.spark.master"), conf.with_prefix(REMOTE_FS_PREFIX), this_host(), conf.get("datalake.catalog-name"))

    @property
    def default_sqlite_path(self) -> Path | None:
        """The SQLite file of an embedded catalog, whose directory must exist before it opens."""
        uri = self.catalog_properties.get("uri", "")
        return Path(uri[len("sqlite:///") :]) if uri.startswith("sqlite:///") else None

    def public(self) -> "LakeConfig":
        """What may leave the server: secrets dropped, passwords and tokens cut out of URIs."""
        return replace(
            self,
            catalog_properties={key: _without_password(value) for key, value in self.catalog_properties.items() if not is_secret(key)},
            spark_master=_without_secret_parameters(self.spark_master),
            remote_fs={key: value for key, value in self.remote_fs.items() if not is_secret(key)},
        )

    def with_overrides(self, overrides: Mapping[str, str]) -> "LakeConfig":
        """This config with a job's own properties (its credentials) on top."""
        return replace(self, catalog_properties={**self.catalog_properties, **overrides})

    def spark_master_for(self, conf: Configuration) -> str:
        """The Spark a client or a job uses: its own ``lake.spark.master``, else the one the cluster
        advertises; '' when neither is set."""
        return conf.get("lake.spark.master") or self.spark_master

    def local_parts(self) -> dict[str, str]:
        """The ``datalake.iceberg.*`` keys whose values only the servers' machine can reach."""
        return {
            f"{PROPERTY_PREFIX}{key}": value
            for key, value in self.catalog_properties.items()
            if key in ("uri", "warehouse") and _is_local_location(value)
        }

    def refuse_local_parts(self, where: str) -> None:
        """Raise :class:`InvalidConfigError` if the lake has a part local to the servers' machine:
        ``where`` says who cannot use it (another machine, a Spark cluster's tasks)."""
        local = self.local_parts()
        if local:
            named = ", ".join(f"{key}={value}" for key, value in local.items())
            raise InvalidConfigError(
                f"the lake is local to the lakelog servers' machine ({named}), and {where} cannot share it:"
                f" set {PROPERTY_PREFIX}uri to a shared catalog (e.g. postgresql+psycopg2://HOST/DB, or"
                f" {PROPERTY_PREFIX}type=rest with its uri) and {PROPERTY_PREFIX}warehouse to shared storage"
                f" (s3://BUCKET/PATH) on the servers"
            )

    def refuse_if_elsewhere(self) -> None:
        """A client or job on another machine than the servers must not open their local catalog
        (a SQLite file there would be a new, empty catalog here)."""
        if self.server_host and self.server_host != this_host():
            self.refuse_local_parts(f"this machine ({this_host()}, not {self.server_host})")
