"""TLS credentials from configuration, one place for clients and servers alike.

A server presents ``security.tls.cert-file`` and ``security.tls.key-file``; whoever dials a server
(a client, a tablet server registering with its coordinator, the coordinator notifying a tablet
server, the tiering job) verifies it against ``security.tls.ca-file``. Errors name the key and the
file, never the file's contents.
"""

from __future__ import annotations

import datetime
import logging
from pathlib import Path

import grpc

from lakelog.config import Configuration
from lakelog.errors import InvalidConfigError

log = logging.getLogger(__name__)

_PEM_MARKER = b"-----BEGIN "
# Warn this long before a server's certificate expires: time to renew it before clients are refused.
EXPIRY_WARNING = datetime.timedelta(days=14)


def _read_pem(conf: Configuration, key: str) -> bytes:
    """The PEM file of ``key``, checked to be PEM at all so that a wrong path fails at start with
    the key's name, not later as a handshake error on every call."""
    path = conf.get(key)
    if not path:
        raise InvalidConfigError(f"security.tls.enabled needs {key}")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidConfigError(f"{key}: cannot read {path}: {exc.strerror}") from None
    if _PEM_MARKER not in data:
        raise InvalidConfigError(f"{key}: {path} is not a PEM file")
    return data


def server_credentials(conf: Configuration) -> grpc.ServerCredentials | None:
    """What a server listens with; ``None``: plaintext (``security.tls.enabled`` off)."""
    if not conf.get("security.tls.enabled"):
        return None
    key = _read_pem(conf, "security.tls.key-file")
    chain = _read_pem(conf, "security.tls.cert-file")
    _check_validity(chain, conf.get("security.tls.cert-file"))
    return grpc.ssl_server_credentials([(key, chain)])


def _check_validity(chain: bytes, path: str) -> None:
    """A server whose certificate expired would start and then fail every handshake with an error
    clients cannot place; it refuses to start instead, and warns two weeks ahead."""
    from cryptography import x509

    try:
        certificate = x509.load_pem_x509_certificate(chain)
    except ValueError as exc:
        raise InvalidConfigError(f"security.tls.cert-file: {path} holds no readable certificate: {exc}") from None
    now = datetime.datetime.now(datetime.timezone.utc)
    expires = certificate.not_valid_after_utc
    if now >= expires:
        raise InvalidConfigError(f"security.tls.cert-file: the certificate in {path} expired on {expires:%Y-%m-%d %H:%M} UTC; renew it")
    if now < certificate.not_valid_before_utc:
        raise InvalidConfigError(
            f"security.tls.cert-file: the certificate in {path} is not valid before {certificate.not_valid_before_utc:%Y-%m-%d %H:%M} UTC"
        )
    if expires - now < EXPIRY_WARNING:
        log.warning("the certificate in %s expires on %s UTC, in %d day(s): renew it", path, f"{expires:%Y-%m-%d %H:%M}", (expires - now).days)


def channel_credentials(conf: Configuration) -> grpc.ChannelCredentials | None:
    """What a caller dials with; ``None``: plaintext. Without ``security.tls.ca-file`` the system's
    trusted roots verify the server."""
    if not conf.get("security.tls.enabled"):
        return None
    roots = _read_pem(conf, "security.tls.ca-file") if conf.get("security.tls.ca-file") else None
    return grpc.ssl_channel_credentials(root_certificates=roots)
