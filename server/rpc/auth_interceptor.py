"""Token authentication and authorization in front of every RPC of a server.

With ``security.auth.enabled`` each call must carry a bearer token of ``security.auth.tokens-file``
(else UNAUTHENTICATED) whose actions include the one its method needs (else PERMISSION_DENIED). A
refused call never reaches its handler, so nothing is read or written; its request is not even
parsed. Reflection needs a valid token but no particular action: listing methods reveals nothing
the proto does not. Health checks need no token. A method missing from :data:`RPC_ACTIONS` is
refused (fail closed).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

import grpc

from lakelog.config import Configuration
from lakelog.errors import AuthenticationError, AuthorizationError, InvalidConfigError, LakelogError
from lakelog.security.tokens import AUTHORIZATION_KEY, Action, TokenStore
from lakelog.server.metrics.server_metrics import ServerMetrics
from lakelog.server.rpc.error_boundary import abort

log = logging.getLogger(__name__)

_COORDINATOR = "/lakelog.rpc.CoordinatorService/"
_TABLET = "/lakelog.rpc.TabletService/"
REFLECTION_PREFIX = "/grpc.reflection."
# Probes (Docker, Kubernetes) carry no token, and the answer tells only whether the server serves.
HEALTH_PREFIX = "/grpc.health.v1.Health/"

# The one table of what each RPC needs; a test checks it names every method of both services.
RPC_ACTIONS: Mapping[str, Action] = {
    _COORDINATOR + "CreateDatabase": Action.ADMIN,
    _COORDINATOR + "DropDatabase": Action.ADMIN,
    _COORDINATOR + "ListDatabases": Action.READ,
    _COORDINATOR + "CreateTable": Action.ADMIN,
    _COORDINATOR + "DropTable": Action.ADMIN,
    _COORDINATOR + "AlterTable": Action.ADMIN,
    _COORDINATOR + "GetTableSchema": Action.READ,
    _COORDINATOR + "ListTables": Action.READ,
    _COORDINATOR + "GetTableInfo": Action.READ,
    _COORDINATOR + "GetMetadata": Action.READ,
    _COORDINATOR + "RegisterTabletServer": Action.INTERNAL,
    _COORDINATOR + "TabletServerHeartbeat": Action.INTERNAL,
    _COORDINATOR + "CommitLakeTableSnapshot": Action.TIER,
    _COORDINATOR + "GetLakeSnapshot": Action.READ,
    # Readers need the (secret-free) lake config to read the lake tier, not only the tiering job.
    _COORDINATOR + "GetLakeConfig": Action.READ,
    _COORDINATOR + "TieringHeartbeat": Action.TIER,
    _COORDINATOR + "GetTieringJobs": Action.READ,
    _COORDINATOR + "InitWriter": Action.WRITE,
    # A writer creates a missing partition itself (client.writer.dynamic-create-partition.enabled).
    _COORDINATOR + "CreatePartition": Action.WRITE,
    _COORDINATOR + "DropPartition": Action.ADMIN,
    _COORDINATOR + "ListPartitionInfos": Action.READ,
    _COORDINATOR + "AdjustIsr": Action.INTERNAL,
    # A consumer group member reads: joining, heartbeating and committing where it read are part of it.
    _COORDINATOR + "GroupHeartbeat": Action.READ,
    _COORDINATOR + "CommitGroupOffsets": Action.READ,
    _COORDINATOR + "ListGroups": Action.READ,
    _COORDINATOR + "DescribeGroup": Action.READ,
    _COORDINATOR + "ListGroupOffsets": Action.READ,
    _COORDINATOR + "ResetGroupOffsets": Action.ADMIN,
    _TABLET + "ProduceLog": Action.WRITE,
    _TABLET + "FetchLog": Action.READ,
    _TABLET + "ListOffsets": Action.READ,
    _TABLET + "DescribeLogBuckets": Action.READ,
    _TABLET + "NotifyLeaderAndIsr": Action.INTERNAL,
    _TABLET + "NotifyLakeTableOffset": Action.INTERNAL,
    _TABLET + "GetServerTime": Action.READ,
    _TABLET + "OpenBarrierHold": Action.WRITE,
    _TABLET + "CloseBarrierHold": Action.WRITE,
    _TABLET + "RepairLog": Action.ADMIN,
    _TABLET + "OffsetForLeaderEpoch": Action.INTERNAL,
}


# The principal a call comes from, for what is bound to it (writer tokens): the name of the token
# it authenticated with, "" with authentication off, where every caller is the same principal.
CallerName = Callable[[grpc.ServicerContext], str]


def anonymous_caller(context: grpc.ServicerContext) -> str:
    return ""


class AuthInterceptor(grpc.ServerInterceptor):
    """Refusals are counted in ``metrics`` like every other failed call."""

    def __init__(self, tokens: TokenStore, metrics: ServerMetrics) -> None:
        self._tokens = tokens
        self._metrics = metrics

    @classmethod
    def from_configuration(cls, conf: Configuration, metrics: ServerMetrics) -> "AuthInterceptor | None":
        """``None`` when ``security.auth.enabled`` is off."""
        if not conf.get("security.auth.enabled"):
            return None
        path = conf.get("security.auth.tokens-file")
        if not path:
            raise InvalidConfigError("security.auth.enabled needs security.auth.tokens-file")
        return cls(TokenStore.load(path), metrics)

    @property
    def token_count(self) -> int:
        return len(self._tokens)

    @property
    def tokens(self) -> TokenStore:
        """The accepted tokens, for the HTTP pages that share them (the status page)."""
        return self._tokens

    def caller_name(self, context: grpc.ServicerContext) -> str:
        """The name of the token the call presented (the interceptor admitted the call already)."""
        authorization = next((str(v) for k, v in context.invocation_metadata() or () if k == AUTHORIZATION_KEY), None)
        return self._tokens.authenticate(authorization).name

    def check(self, method: str, authorization: str | None) -> None:
        """Raises AuthenticationError or AuthorizationError unless the call may proceed."""
        if method.startswith(HEALTH_PREFIX):
            return
        principal = self._tokens.authenticate(authorization)
        if method.startswith(REFLECTION_PREFIX):
            return
        action = RPC_ACTIONS.get(method)
        if action is None:
            raise AuthorizationError(f"{method} has no required action, so no token may call it")
        principal.require(action, method)

    def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None], details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(details)
        if handler is None:  # not a method of this server: grpc answers UNIMPLEMENTED
            return None
        authorization = next((str(v) for k, v in details.invocation_metadata or () if k == AUTHORIZATION_KEY), None)
        try:
            self.check(details.method, authorization)
        except (AuthenticationError, AuthorizationError) as error:
            log.warning("refused %s: %s", details.method, error.message)
            return refusal(handler, details.method.rsplit("/", 1)[-1], error, self._metrics)
        return handler


def refusal(handler: grpc.RpcMethodHandler, method: str, error: LakelogError, metrics: ServerMetrics) -> grpc.RpcMethodHandler:
    """A handler of the same kind as ``handler`` that answers ``error`` without parsing the request."""

    def refuse(request: Any, context: grpc.ServicerContext) -> Any:
        abort(context, error, metrics, method)

    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(refuse)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(refuse)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(refuse)
    return grpc.stream_stream_rpc_method_handler(refuse)
