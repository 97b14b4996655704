"""Remote storage locations (``file://`` or ``s3://``) and the pyarrow file systems that reach them.

The tablet server and the client both reach remote log segments, each with its own settings:
the server from ``remote.data.dir`` and ``remote.fs.*``, the client from its own ``remote.fs.*``
(the server never sends credentials). Credentials come from the usual AWS environment variables.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping
from urllib.parse import urlparse

import pyarrow.fs as pafs

from lakelog.errors import InvalidConfigError, RemoteStorageError

SCHEMES = ("file", "s3")


@dataclass(frozen=True)
class RemoteLocation:
    """A URI split into the file system that serves it and the path inside that file system."""

    uri: str
    scheme: str
    path: str

    @classmethod
    def parse(cls, uri: str) -> "RemoteLocation":
        if "://" not in uri:
            uri = Path(uri).resolve().as_uri()
        parsed = urlparse(uri)
        if parsed.scheme not in SCHEMES:
            raise InvalidConfigError(f"remote storage {uri!r}: scheme must be one of {', '.join(SCHEMES)}")
        if parsed.scheme == "s3":
            if not parsed.netloc:
                raise InvalidConfigError(f"remote storage {uri!r}: an s3:// URI needs a bucket")
            path = f"{parsed.netloc}{parsed.path}".rstrip("/")
        else:
            path = parsed.path.rstrip("/") or "/"
        return cls(uri.rstrip("/"), parsed.scheme, path)

    def child(self, *parts: str) -> "RemoteLocation":
        suffix = "/".join(parts)
        return RemoteLocation(f"{self.uri}/{suffix}", self.scheme, f"{self.path}/{suffix}")


def file_system(location: RemoteLocation, settings: Mapping[str, str]) -> pafs.FileSystem:
    """The file system for ``location``; ``settings`` are ``remote.fs.*`` keys without the prefix."""
    if location.scheme == "file":
        return pafs.LocalFileSystem()
    endpoint = settings.get("s3.endpoint") or os.environ.get("AWS_ENDPOINT_URL", "")
    options: dict[str, object] = {
        "region": settings.get("s3.region") or os.environ.get("AWS_REGION", "us-east-1"),
        "connect_timeout": float(settings.get("s3.connect-timeout", "3")),
        "request_timeout": float(settings.get("s3.request-timeout", "10")),
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=int(settings.get("s3.max-attempts", "2"))),
        # A write smaller than one multipart part becomes a single PUT: a small object (a manifest)
        # is replaced in one request, and no upload is left half-initiated by an early failure.
        "allow_delayed_open": True,
    }
    if endpoint:
        parsed = urlparse(endpoint if "://" in endpoint else f"http://{endpoint}")
        options["endpoint_override"] = parsed.netloc
        options["scheme"] = parsed.scheme
    if "s3.access-key" in settings:
        options["access_key"] = settings["s3.access-key"]
        options["secret_key"] = settings.get("s3.secret-key", "")
    try:
        return pafs.S3FileSystem(**options)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises plain ArrowInvalid/OSError here
        raise RemoteStorageError(f"cannot open S3 for {location.uri}: {exc}") from None
