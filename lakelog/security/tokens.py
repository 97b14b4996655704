"""Bearer tokens: how a caller sends one and how a server recognises it.

A caller sends ``authorization: Bearer <token>`` in the gRPC metadata of every call. A server with
``security.auth.enabled`` reads ``security.auth.tokens-file`` at start: a YAML (or JSON) mapping of
token names to the SHA-256 of the token and the actions it allows::

    analyst:
      sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
      actions: [read]

The file holds hashes only, so reading it does not reveal a token; a presented token is hashed and
compared with :func:`hmac.compare_digest`. Tokens and hashes never appear in errors or logs, only
token names.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import grpc

from lakelog.errors import AuthenticationError, AuthorizationError, InvalidConfigError

AUTHORIZATION_KEY = "authorization"
_BEARER = "bearer "
_HEX_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class Action(enum.StrEnum):
    """What a token may do; every RPC needs exactly one (see the server's method table)."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"
    TIER = "tier"
    # Calls between the servers (registration, leadership, lake offsets): kept apart from ``admin``
    # so that an operator's token cannot pose as a tablet server and take over buckets.
    INTERNAL = "internal"


def hash_token(token: str) -> str:
    """The hex SHA-256 a tokens file stores for ``token``."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    """Who called: the name of the token (safe to log) and the actions it allows."""

    name: str
    actions: frozenset[Action]

    def require(self, action: Action, method: str) -> None:
        if action not in self.actions:
            allowed = ", ".join(sorted(self.actions)) or "nothing"
            raise AuthorizationError(f"token {self.name!r} may not call {method}: it needs '{action}', the token allows {allowed}")


class TokenStore:
    """The tokens a server accepts, by hash."""

    def __init__(self, digests: Mapping[str, Principal]) -> None:
        self._digests = dict(digests)

    def __len__(self) -> int:
        return len(self._digests)

    @classmethod
    def load(cls, path: str | Path) -> "TokenStore":
        import yaml  # also reads a JSON token file

        try:
            loaded = yaml.safe_load(Path(path).read_text())
        except OSError as exc:
            raise InvalidConfigError(f"security.auth.tokens-file: cannot read {path}: {exc.strerror}") from None
        except yaml.YAMLError:
            raise InvalidConfigError(f"security.auth.tokens-file: {path} is not YAML or JSON") from None
        if not isinstance(loaded, Mapping) or not loaded:
            raise InvalidConfigError(f"security.auth.tokens-file: {path} must map token names to {{sha256, actions}}")
        digests: dict[str, Principal] = {}
        for name, entry in loaded.items():
            digest, principal = _entry(str(name), entry, path)
            if digest in digests:
                raise InvalidConfigError(f"security.auth.tokens-file: tokens {digests[digest].name!r} and {name!r} are the same token")
            digests[digest] = principal
        return cls(digests)

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal of an ``authorization`` metadata value; every stored hash is compared, in
        constant time each, so the answer's timing does not tell how close a guess came."""
        if not authorization:
            raise AuthenticationError("this server requires a bearer token (client key security.auth.token)")
        if not authorization.lower().startswith(_BEARER):
            raise AuthenticationError("the authorization metadata must read 'Bearer <token>'")
        presented = hash_token(authorization[len(_BEARER) :].strip())
        found: Principal | None = None
        for digest, principal in self._digests.items():
            if hmac.compare_digest(presented, digest):
                found = principal
        if found is None:
            raise AuthenticationError("the bearer token is not valid on this server")
        return found


def _entry(name: str, entry: Any, path: str | Path) -> tuple[str, Principal]:
    where = f"security.auth.tokens-file {path}: token {name!r}"
    if not isinstance(entry, Mapping) or set(entry) != {"sha256", "actions"}:
        raise InvalidConfigError(f"{where} needs exactly the keys sha256 and actions")
    digest = str(entry["sha256"]).strip().lower()
    if not _HEX_SHA256.match(digest):
        raise InvalidConfigError(f"{where}: sha256 must be 64 hex digits (printf %s TOKEN | sha256sum)")
    actions = entry["actions"]
    if not isinstance(actions, list) or not actions:
        raise InvalidConfigError(f"{where}: actions must be a non-empty list of {', '.join(Action)}")
    try:
        return digest, Principal(name, frozenset(Action(str(action)) for action in actions))
    except ValueError:
        raise InvalidConfigError(f"{where}: actions must be among {', '.join(Action)}, got {actions}") from None


class CallMetadata(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """The caller's side: adds fixed metadata to every call of a channel, streaming ones
    (reflection) included."""

    def __init__(self, *metadata: tuple[str, str]) -> None:
        self._metadata = metadata

    def _with_metadata(self, details: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        return details._replace(metadata=(*(details.metadata or ()), *self._metadata))  # type: ignore[attr-defined]

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, request: Any) -> Any:
        return continuation(self._with_metadata(details), request)

    def intercept_unary_stream(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, request: Any) -> Any:
        return continuation(self._with_metadata(details), request)

    def intercept_stream_unary(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, requests: Any) -> Any:
        return continuation(self._with_metadata(details), requests)

    def intercept_stream_stream(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, requests: Any) -> Any:
        return continuation(self._with_metadata(details), requests)


class BearerToken(CallMetadata):
    """Adds ``authorization: Bearer <token>`` to every call of a channel."""

    def __init__(self, token: str) -> None:
        super().__init__((AUTHORIZATION_KEY, f"Bearer {token}"))
