"""The one error hierarchy of lakelog, shared by the servers, the client and the CLI.

Every error carries a stable numeric ``code`` so that it crosses the wire (as a per-bucket
``error_code`` or as a gRPC status with the code in trailing metadata) and is raised again on the
client as the same class. ``retriable`` tells a caller whether trying again later can succeed.
"""

from __future__ import annotations

from typing import ClassVar

# The most of a message an error keeps, in UTF-8 bytes: a message crosses the wire as a gRPC status
# (its details travel in a header, which gRPC clients refuse past 8-16 KiB, percent-encoded) and
# echoes what it names, which a client may have sent at any length (a name of 100,000 characters).
MAX_MESSAGE_BYTES = 1000


def cut_message(message: str) -> str:
    """``message`` within ``MAX_MESSAGE_BYTES``: a longer one keeps its start and its end (what is
    wrong and why), the middle (the long name or value it echoes) is cut, saying how much."""
    data = message.encode()
    if len(data) <= MAX_MESSAGE_BYTES:
        return message
    keep = (MAX_MESSAGE_BYTES - 40) // 2
    head, tail = data[:keep].decode(errors="ignore"), data[-keep:].decode(errors="ignore")
    return f"{head}...[{len(data) - 2 * keep} bytes cut]...{tail}"


class LakelogError(Exception):
    """Base of every error lakelog raises to its users; its message is cut to ``MAX_MESSAGE_BYTES``."""

    code: ClassVar[int] = 1
    retriable: ClassVar[bool] = False

    def __init__(self, message: str) -> None:
        message = cut_message(message)
        super().__init__(message)
        self.message = message

    def naming(self, subject: str) -> "LakelogError":
        """This error with ``subject`` (a table's bucket, say) in front of its message when the
        message does not name it: a server that knows a table only by an id it no longer holds
        can say only "no table or partition has id 7", and the user wrote to a name."""
        if subject in self.message:
            return self
        named = type(self).__new__(type(self))
        named.__dict__.update(self.__dict__)
        named.message = cut_message(f"{subject}: {self.message}")
        named.args = (named.message,)
        return named


class NetworkError(LakelogError):
    """A server could not be reached or the connection broke."""

    code = 2
    retriable = True


class ServerUnreachableError(NetworkError):
    """No connection to the server could be made (refused, no route, unknown host): the request
    was never sent, so sending it again can do no harm, whatever it asked."""

    code = 40


class RequestTimeoutError(LakelogError):
    code = 3
    retriable = True


class InvalidRequestError(LakelogError):
    """A request is malformed: a missing field, a negative size, a value out of its range."""

    code = 4


class InvalidConfigError(LakelogError):
    code = 5


class TlsError(LakelogError):
    """A TLS handshake with a server failed: its certificate is not signed by the CA of
    ``security.tls.ca-file``, does not name the address dialled, or the server does not speak TLS.
    Not retriable: trying again fails the same way until the configuration changes."""

    code = 6


class AuthenticationError(LakelogError):
    """A call without a valid bearer token to a server with ``security.auth.enabled``."""

    code = 7


class AuthorizationError(LakelogError):
    """A call whose token is valid but lacks the action (``read``, ``write``, ...) the RPC needs."""

    code = 8


class InvalidNameError(LakelogError):
    """A database or table name that does not match ``[A-Za-z0-9_][A-Za-z0-9_-]{0,127}``."""

    code = 10


class DatabaseNotExistError(LakelogError):
    code = 11


class DatabaseAlreadyExistError(LakelogError):
    code = 12


class DatabaseNotEmptyError(LakelogError):
    code = 13


class TableNotExistError(LakelogError):
    code = 14


class TableAlreadyExistError(LakelogError):
    code = 15


class InvalidTableError(LakelogError):
    """A table descriptor the server cannot accept (no columns, bad bucket count, bad property)."""

    code = 16


class InvalidAlterTableError(InvalidRequestError):
    """An ``alter_table`` change that is not allowed (a name clash, a type that is no widening, a
    partition or bucket key widened, anything but adding or widening a column): names the column,
    and nothing changed."""

    code = 90


class SchemaNotExistError(LakelogError):
    """A schema id a table never had."""

    code = 91


class UnknownBucketError(LakelogError):
    code = 17


class NoTabletServerError(LakelogError):
    """No tablet server has registered with the coordinator, so buckets cannot be placed."""

    code = 18
    retriable = True


class NotLeaderError(LakelogError):
    """The tablet server asked does not lead the bucket; the client refreshes its metadata."""

    code = 19
    retriable = True


class SchemaMismatchError(LakelogError):
    """Rows or batches whose columns or types do not match the table's schema."""

    code = 20


class CorruptRecordError(LakelogError):
    """A stored or received batch failed its CRC or header check."""

    code = 21


class RecordFormatError(LakelogError):
    """A batch in a record format version this lakelog does not read (files of an older lakelog).
    Not a :class:`CorruptRecordError`: recovery never truncates such a file, it refuses it."""

    code = 33


class StorageError(LakelogError):
    """The local disk refused a write or read (disk full, I/O error)."""

    code = 22
    retriable = True


class RemoteStorageError(LakelogError):
    """Remote log storage (a directory or S3) could not be read or written."""

    code = 23
    retriable = True


class LakeError(LakelogError):
    """The lake (Iceberg catalog or warehouse) could not be read or written."""

    code = 24
    retriable = True


class InvalidTimestampError(LakelogError):
    """A timestamp past what a lake snapshot holds."""

    code = 25


class LakeDataError(LakelogError):
    """The lake returned a gap, a duplicate or an offset out of order."""

    code = 26


class LakeSnapshotNotExistError(LakelogError):
    """A lake-enabled table no tiering round has committed yet, so it has no lake snapshot."""

    code = 27


class StaleLakeSnapshotError(LakelogError):
    """A lake snapshot commit that would move a bucket's lake end offset backwards; the coordinator
    already holds a newer snapshot (a racing tiering job committed after this one)."""

    code = 28


class UnknownServerError(LakelogError):
    """An unexpected failure on a server; its message is the server's own."""

    code = 30


class OffsetOutOfRangeError(LakelogError):
    """No tier holds the offset asked for; ``earliest`` is the first readable offset."""

    code = 31

    def __init__(self, bucket: int, offset: int, earliest: int, message: str | None = None) -> None:
        self.bucket = bucket
        self.offset = offset
        self.earliest = earliest
        super().__init__(
            message
            or f"offset {offset} of bucket {bucket} is out of range; the earliest readable offset is {earliest}"
        )



class BarrierHoldError(LakelogError):
    """A write or close names a barrier hold that is not open on the server: never opened, closed,
    expired, or lost in a restart. A tiering barrier may then have fallen between its writes."""

    code = 32


class DataDirectoryLockedError(LakelogError):
    """Another server holds the lock on this data directory; starting would corrupt both."""

    code = 34


class ServerNotReadyError(LakelogError):
    """A tablet server that has just started and not yet learned its buckets and lake offsets from
    the coordinator (answering now could skip the lake tier), or a bucket's new leader whose high
    watermark has not yet reached what the old leader acknowledged. Retriable: it is ready in moments."""

    code = 36
    retriable = True


class LogFencedError(LakelogError):
    """A bucket whose local log came back shorter than what it had acknowledged refuses writes, so
    no offset a reader consumed is reused, until an operator runs ``lakelog repair local``."""

    code = 35


class InvalidPartitionError(InvalidRequestError):
    """A partition spec or value that cannot name a partition: not a string, empty, a character
    outside ``A-Z a-z 0-9 _ - .``, ``..``, or not exactly the table's partition keys."""

    code = 60


class PartitionNotExistError(LakelogError):
    """A partition (by name or id) that the table does not have, or no longer has."""

    code = 61


class InvalidRecordError(InvalidRequestError):
    """A produced batch whose body disagrees with its header (record count, more than one Arrow
    record batch, buffers or values that do not decode): refused before it is stored, since every
    reader of the bucket would fail on it."""

    code = 66


class UnknownWriterError(LakelogError):
    """A produced batch of a writer id that the coordinator did not issue to the caller: the
    writer token sent with it does not match the id and the caller's principal. Refused, so no
    client can append under another writer's id and turn that writer's real batch into a
    "duplicate". Not retriable: the writer must get an id of its own (a new writer)."""

    code = 67


class OutOfOrderSequenceError(LakelogError):
    """An idempotent writer's batch whose sequence is not the next one the bucket expects for that
    writer (a gap, or an epoch older than the one the bucket has seen): appending it could reorder
    or duplicate records, so it is refused. Not retriable: the writer must start a new epoch."""

    code = 64


class WriterSequenceConflictError(OutOfOrderSequenceError):
    """A batch whose writer, epoch and sequence match one the bucket appended, but whose bytes do
    not (another CRC): it is not a resend of that batch, so it is neither appended nor answered
    with that batch's offsets. Names the writer, the sequence and where the appended one lies."""

    code = 68


class DeliveryTimeoutError(LakelogError):
    """A writer gave up on a batch: it was not acknowledged within ``client.writer.delivery-timeout``
    though retried. Names the table, the bucket and how many records were not delivered."""

    code = 65

    def __init__(self, message: str, bucket: int = -1, records: int = 0) -> None:
        super().__init__(message)
        self.bucket = bucket
        self.records = records


class PartitionAlreadyExistsError(LakelogError):
    """A partition that the table already has, created again without ``ignore_if_exists``."""

    code = 62


class TooManyPartitionsError(LakelogError):
    """Creating the partition would pass the coordinator's ``max.partition.num``."""

    code = 63


class PartitionNotInLakeError(LakelogError):
    """A partition of a lake-enabled table whose log cannot be dropped yet: the lake does not hold
    all of it (or a leader could not say how far its log goes). Retriable: once the tiering job has
    tiered the partition, the drop succeeds; auto-partitioning retries it on every check."""

    code = 70
    retriable = True


class TooManyBucketsError(LakelogError):
    """Creating a table or partition would place more buckets on a tablet server than
    ``coordinator.max-buckets-per-tablet-server`` allows (by default as many as its open-file
    limit holds): refused before anything is created, so no table exists that cannot be led."""

    code = 80


class InvalidReplicationFactorError(LakelogError):
    """A table's replication factor is below 1 or above the number of live tablet servers: its
    buckets' copies could not all sit on different servers."""

    code = 71


class NotEnoughReplicasError(LakelogError):
    """A produce with ``acks=all`` to a bucket whose in-sync replicas are fewer than its
    ``min-in-sync-replicas``; the message names the bucket and the ISR. Retriable: a follower that
    catches up rejoins the ISR."""

    code = 72
    retriable = True


class GroupNotEmptyError(LakelogError):
    """A consumer group's offsets may be reset only while it has no member: a live member would
    commit over the reset."""

    code = 100


class UnknownMemberError(LakelogError):
    """The coordinator does not know this consumer group member (its session expired, or the
    coordinator restarted): the member joins again with a new id."""

    code = 101
    retriable = True


class FencedMemberError(LakelogError):
    """A consumer group member sent an epoch that is not its current one (it missed an answer):
    it gives its buckets up without committing and joins again."""

    code = 102
    retriable = True


_BY_CODE: dict[int, type[LakelogError]] = {}


def _register(cls: type[LakelogError]) -> None:
    _BY_CODE[cls.code] = cls
    for sub in cls.__subclasses__():
        _register(sub)


_register(LakelogError)


def error_class(code: int) -> type[LakelogError]:
    """The error class for a wire code; unknown codes become :class:`UnknownServerError`."""
    return _BY_CODE.get(code, UnknownServerError)


def error_from_code(code: int, message: str) -> LakelogError:
    """Rebuild an error received over the wire (offset errors are rebuilt by their own parser)."""
    cls = error_class(code)
    if cls is OffsetOutOfRangeError:
        return OffsetOutOfRangeError(-1, -1, -1, message)
    return cls(message)
