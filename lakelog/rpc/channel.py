"""How every caller dials a lakelog server — the client, a tablet server registering with its
coordinator, the coordinator notifying tablet servers, the tiering job — so that TLS and the bearer
token are applied from the same keys everywhere and no caller can forget one."""

from __future__ import annotations

from typing import Sequence

import grpc

from lakelog.config import Configuration
from lakelog.security.tls import channel_credentials
from lakelog.security.tokens import BearerToken


def open_channel(address: str, conf: Configuration, options: Sequence[tuple[str, int]]) -> grpc.Channel:
    """A channel to ``address``: over TLS with ``security.tls.enabled``, every call carrying
    ``security.auth.token`` when one is set."""
    credentials = channel_credentials(conf)
    if credentials is None:
        channel = grpc.insecure_channel(address, options=list(options))
    else:
        channel = grpc.secure_channel(address, credentials, options=list(options))
    token = conf.get("security.auth.token")
    return grpc.intercept_channel(channel, BearerToken(token)) if token else channel
