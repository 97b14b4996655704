"""How a LakelogError crosses a gRPC call: a status code for grpcurl users plus the exact lakelog
error code in trailing metadata, so the client raises the same class the server raised."""

from __future__ import annotations

import re

import grpc

from lakelog import errors

ERROR_CODE_KEY = "lakelog-error-code"
# How grpc core words a failed TLS handshake in a call's details, first match wins: what it means.
_TLS_FAILURES = (
    (re.compile(r"WRONG_VERSION_NUMBER", re.IGNORECASE), "it does not speak TLS (a plaintext server): enable TLS on it, or set security.tls.enabled=false here"),
    (re.compile(r"certificate has expired", re.IGNORECASE), "its certificate has expired: the server needs a renewed one"),
    (re.compile(r"not yet valid", re.IGNORECASE), "its certificate is not valid yet (a clock off, or a certificate issued for later)"),
    (re.compile(r"Hostname Verification|not in peer certificate", re.IGNORECASE), "its certificate does not name the address dialled"),
    (
        re.compile(r"handshake failed|SSL_ERROR|CERTIFICATE_VERIFY_FAILED", re.IGNORECASE),
        "its certificate is not signed by the CA of security.tls.ca-file (or the system's roots)",
    ),
)
# A TLS server closes a plaintext client's connection at once.
_CLOSED_AT_CONNECT = re.compile(r"Socket closed", re.IGNORECASE)
# How grpc core says that no connection was made, so the call never left this process.
_NOT_CONNECTED = re.compile(r"failed to connect to all addresses|connection refused|DNS resolution failed", re.IGNORECASE)

_STATUS: dict[type[errors.LakelogError], grpc.StatusCode] = {
    errors.InvalidRequestError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.InvalidConfigError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.InvalidNameError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.InvalidTableError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.SchemaMismatchError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.DatabaseNotExistError: grpc.StatusCode.NOT_FOUND,
    errors.TableNotExistError: grpc.StatusCode.NOT_FOUND,
    errors.SchemaNotExistError: grpc.StatusCode.NOT_FOUND,
    errors.UnknownBucketError: grpc.StatusCode.NOT_FOUND,
    errors.LakeSnapshotNotExistError: grpc.StatusCode.NOT_FOUND,
    errors.StaleLakeSnapshotError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.DatabaseAlreadyExistError: grpc.StatusCode.ALREADY_EXISTS,
    errors.TableAlreadyExistError: grpc.StatusCode.ALREADY_EXISTS,
    errors.DatabaseNotEmptyError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.NotLeaderError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.BarrierHoldError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.DataDirectoryLockedError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.LogFencedError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.GroupNotEmptyError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.UnknownMemberError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.FencedMemberError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.OffsetOutOfRangeError: grpc.StatusCode.OUT_OF_RANGE,
    errors.InvalidTimestampError: grpc.StatusCode.OUT_OF_RANGE,
    errors.CorruptRecordError: grpc.StatusCode.DATA_LOSS,
    errors.RecordFormatError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.LakeDataError: grpc.StatusCode.DATA_LOSS,
    errors.StorageError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.TooManyBucketsError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.NoTabletServerError: grpc.StatusCode.UNAVAILABLE,
    errors.ServerNotReadyError: grpc.StatusCode.UNAVAILABLE,
    errors.NetworkError: grpc.StatusCode.UNAVAILABLE,
    errors.RemoteStorageError: grpc.StatusCode.UNAVAILABLE,
    errors.LakeError: grpc.StatusCode.UNAVAILABLE,
    errors.RequestTimeoutError: grpc.StatusCode.DEADLINE_EXCEEDED,
    errors.AuthenticationError: grpc.StatusCode.UNAUTHENTICATED,
    errors.AuthorizationError: grpc.StatusCode.PERMISSION_DENIED,
}


def status_code(error: errors.LakelogError) -> grpc.StatusCode:
    for cls in type(error).__mro__:
        if cls in _STATUS:
            return _STATUS[cls]
    return grpc.StatusCode.INTERNAL


def error_from_rpc(exc: grpc.RpcError, target: str, plaintext: bool = False) -> errors.LakelogError:
    """Turn a failed call into the lakelog error it carries; transport failures become NetworkError.
    ``plaintext``: the caller dialled without TLS, so a connection closed at once may mean a TLS server."""
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    trailing = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    for key, value in trailing or ():
        if key == ERROR_CODE_KEY:
            return errors.error_from_code(int(value), details or "")
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN):
        for pattern, meaning in _TLS_FAILURES:
            if pattern.search(details or ""):
                return errors.TlsError(f"TLS handshake with {target} failed: {meaning} ({details})")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return errors.RequestTimeoutError(f"request to {target} timed out: {details}")
    if code == grpc.StatusCode.UNAVAILABLE and _NOT_CONNECTED.search(details or ""):
        hint = ""
        if plaintext and _CLOSED_AT_CONNECT.search(details or ""):
            hint = " (it closed the connection at once, as a TLS server does to a plaintext client: if it uses TLS, set security.tls.enabled=true)"
        return errors.ServerUnreachableError(f"cannot reach {target}: {details}{hint}")
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN):
        return errors.NetworkError(f"cannot reach {target}: {details}")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return errors.InvalidRequestError(f"{target} refused the request: {details}")
    return errors.UnknownServerError(f"{target} failed: {code}: {details}")
