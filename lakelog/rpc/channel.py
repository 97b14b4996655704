"""How every caller dials a lakelog server — the client, a tablet server registering with its
coordinator, the coordinator notifying tablet servers, the tiering job — so that the message size
limit, TLS and the bearer token are applied from the same keys everywhere and no caller can forget one."""

from __future__ import annotations

import threading

import grpc

from lakelog.config import Configuration
from lakelog.errors import LakelogError
from lakelog.security.tls import channel_credentials
from lakelog.security.tokens import BearerToken


def channel_options(max_message_size: int) -> list[tuple[str, int]]:
    """grpcio refuses messages over 4 MiB unless both ends raise the limit. Its reconnect backoff
    grows to 120 s by default, so a restarted server would be found again only seconds to minutes
    after its port opened; capped at 1 s, callers reach it within a second."""
    return [
        ("grpc.max_send_message_length", max_message_size),
        ("grpc.max_receive_message_length", max_message_size),
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
    ]


def open_channel(address: str, conf: Configuration) -> grpc.Channel:
    """A channel to ``address`` with ``rpc.max-message-size``: over TLS with ``security.tls.enabled``,
    every call carrying ``security.auth.token`` when one is set."""
    options = channel_options(conf.get("rpc.max-message-size"))
    credentials = channel_credentials(conf)
    if credentials is None:
        channel = grpc.insecure_channel(address, options=options)
    else:
        channel = grpc.secure_channel(address, credentials, options=options)
    token = conf.get("security.auth.token")
    return grpc.intercept_channel(channel, BearerToken(token)) if token else channel


class ChannelPool:
    """One channel per server address, opened on first use and closed together."""

    def __init__(self, conf: Configuration) -> None:
        self._conf = conf
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()
        self._closed = False

    def get(self, address: str) -> grpc.Channel:
        with self._lock:
            if self._closed:
                raise LakelogError("the connection is closed")
            channel = self._channels.get(address)
            if channel is None:
                channel = self._channels[address] = open_channel(address, self._conf)
            return channel

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Closed outside the lock: closing a channel cancels its calls and waits for their
        callbacks, and a callback that sends again (a scanner's fetch) calls :meth:`get`; under the
        lock that was a deadlock (a connection closed with a scanner still reading hung)."""
        with self._lock:
            self._closed = True
            channels = list(self._channels.values())
            self._channels.clear()
        for channel in channels:
            channel.close()
