"""When the client tries a failed request again, and how long it waits first.

One policy for every caller (admin, writer, fetcher, barrier holds, the tiering job), so that a
leader move or a restarting server looks the same from every API. What may be retried depends on
whether sending the request again is safe: a request refused for routing (``NotLeaderError``, no
known leader, a server still restoring its state), refused for too few in-sync replicas
(``NotEnoughReplicasError``) or never sent (``ServerUnreachableError``) was not applied, so it is
always resent; one lost in transport (``NetworkError``,
``RequestTimeoutError``) may have been applied, so it is resent only when that does no harm (reads,
lookups). Storage outages (remote storage, the lake) are the caller's to see, not retried here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from lakelog.config import Configuration
from lakelog.errors import (
    LakeError,
    LakelogError,
    NetworkError,
    NoTabletServerError,
    NotEnoughReplicasError,
    NotLeaderError,
    RemoteStorageError,
    RequestTimeoutError,
    ServerNotReadyError,
    ServerUnreachableError,
)

ROUTING_ERRORS = (NotLeaderError, NoTabletServerError, ServerNotReadyError, ServerUnreachableError, NotEnoughReplicasError)
TRANSPORT_ERRORS = (NetworkError, RequestTimeoutError)
CALLER_ERRORS = (RemoteStorageError, LakeError)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff from ``backoff_s`` up to ``max_backoff_s``, each wait jittered over its
    upper half so that clients that failed together do not retry together."""

    backoff_s: float = 0.1
    max_backoff_s: float = 1.0

    @classmethod
    def from_config(cls, conf: Configuration) -> "RetryPolicy":
        return cls(conf.get("client.retry.backoff") / 1000, conf.get("client.retry.max-backoff") / 1000)

    def should_retry(self, error: LakelogError, resend_safe: bool) -> bool:
        if isinstance(error, CALLER_ERRORS):
            return False
        if isinstance(error, ROUTING_ERRORS):
            return True
        return resend_safe and error.retriable

    def delay_s(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (0 for the first retry)."""
        ceiling = min(self.backoff_s * (2 ** min(attempt, 30)), self.max_backoff_s)
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    @staticmethod
    def needs_metadata(error: LakelogError) -> bool:
        """A failure that may mean the bucket moved: the caller's leader map must be refreshed."""
        return isinstance(error, ROUTING_ERRORS + TRANSPORT_ERRORS)
