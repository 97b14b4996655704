"""The buckets one tablet server leads, and the produce, fetch and offset logic over their logs.

Plain Python, no gRPC. A fetch reads with :meth:`ReplicaManager.read_fetch`; one without enough
bytes long-polls on :attr:`ReplicaManager.waiters` (parked on the RPC event loop, no thread held),
which a high-watermark advance of one of its buckets wakes, until it has ``min_bytes`` or ``max_wait_ms``.

Tiers (docs/contract.md, "Tiers"): a fetch at or above the local log start reads the local log; below it, the
answer is where the records lie in remote storage (the client reads them itself), then, only for a
request that sets ``enable_lake``, the lake snapshot that holds them, else OFFSET_OUT_OF_RANGE. The
earliest readable offset everywhere (fetch responses, EARLIEST, errors) counts the remote tier, and
the lake for a request that enables it; a request without ``enable_lake`` gets exactly the answers
it had before lake reads existed. Remote storage is consulted only for offsets below the local log start, so
an outage of it never stops local produce and fetch.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

import pyarrow as pa

from lakelog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidRequestError,
    LakelogError,
    NetworkError,
    NotLeaderError,
    OffsetOutOfRangeError,
    PartitionNotExistError,
    SchemaMismatchError,
    ServerNotReadyError,
    TableNotExistError,
    UnknownBucketError,
)
from lakelog.cluster_state import BucketReplicas, TableAssignment
from lakelog.fetch_info import LakeLogFetchInfo, RemoteLogFetchInfo
from lakelog.metadata import BucketInfo, OffsetSpec, OffsetType, TableInfo
from lakelog.record import batch as rb
from lakelog.record.projection import BatchProjection
from lakelog.schema_evolution import check_readable
from lakelog.security.writer_tokens import WriterTokens
from lakelog.server.log.log_manager import LogManager
from lakelog.server.log.log_tablet import AppendResult, LogTablet
from lakelog.server.remote.manifest import RemoteLogManifest
from lakelog.server.remote.remote_log_manager import RemoteLogManager
from lakelog.server.replica.barrier_holds import BarrierHolds
from lakelog.server.replica.fetch_waiters import FetchWaiters
from lakelog.server.replica.lake_offsets import LakeRanges
from lakelog.server.replica.projection import check_projection
from lakelog.server.replica.replication import ACKS_ALL, IsrChange, Replication, ReplicationConfig
from lakelog.write_fence import fenced_leader

log = logging.getLogger(__name__)

TableResolver = Callable[[int], TableAssignment]
# How long a fenced bucket's leader waits for its followers to hold everything appended before the fence.
FENCE_REPLICATION_WAIT_S = 30.0


@dataclass(frozen=True)
class BucketFetch:
    table_id: int
    bucket: int
    fetch_offset: int
    max_bytes: int
    leader_epoch: int = -1  # a follower's: the epoch it follows


@dataclass(frozen=True)
class FetchParams:
    buckets: Sequence[BucketFetch]
    projections: dict[int, list[int]] = field(default_factory=dict)
    max_bytes: int = 16 << 20
    min_bytes: int = 1
    max_wait_ms: int = 0
    enable_lake: bool = False
    follower_id: int = -1  # >= 0: a follower copying the buckets, which reads past the high watermark

    def answer_bound(self) -> int:
        """The most record bytes an answer to this fetch can hold."""
        return min(self.max_bytes, sum(max(b.max_bytes, 0) for b in self.buckets))


@dataclass(frozen=True)
class BucketDescription:
    """What DescribeLogBuckets answers for one bucket."""

    info: BucketInfo
    local_segments: int
    remote_segments: int


@dataclass(frozen=True)
class OffsetAnswer:
    """A ListOffsets answer; ``lake_snapshot_id`` >= 0 means the lake must resolve the timestamp."""

    offset: int
    lake_snapshot_id: int = -1


@dataclass(frozen=True)
class ProducedAppend:
    """An append made to a bucket: acknowledged once ``replicated()`` returns (at once unless
    ``acks=all`` waits for the other in-sync replicas; it raises when they do not all get it)."""

    result: AppendResult
    replicated: Callable[[], None]


@dataclass(frozen=True)
class BucketFetchResult:
    """Records read locally, or (``records`` empty) where to read them remotely, or an error;
    ``log_start_offset`` is the earliest readable offset of any tier."""

    table_id: int
    bucket: int
    records: bytes | bytearray | memoryview = b""
    high_watermark: int = -1
    log_start_offset: int = -1
    error: LakelogError | None = None
    remote_log_fetch_info: RemoteLogFetchInfo | None = None
    lake_log_fetch_info: LakeLogFetchInfo | None = None
    leader_epoch: int = -1  # to a follower: the epoch its records were appended in
    starts_segment: bool = False  # to a follower: its records begin a segment of the leader's log
    writer_state: bytes = b""  # to a follower that starts over: the writers as of log_start_offset


class ReplicaManager:
    def __init__(
        self,
        server_id: int,
        logs: LogManager,
        resolve: TableResolver,
        remote: RemoteLogManager,
        max_parked_polls: int = 1000,
        replication: Replication | None = None,
    ) -> None:
        self.server_id = server_id
        self.replication = replication or Replication(server_id, ReplicationConfig(), None)
        self.replication.wake_polls = self.notify_high_watermark
        self._logs = logs
        self._remote = remote
        self.lake = LakeRanges()
        self.holds = BarrierHolds(logs.clock, f"tablet server {server_id}")
        remote.lake_end_offset = self.lake.end_offset
        self._resolve = resolve
        self._tables: dict[int, TableInfo] = {}
        self._led: dict[int, set[int]] = {}
        self._fenced: dict[int, set[int]] = {}  # led buckets that take no writes (see lakelog.write_fence)
        self._copies: dict[int, Mapping[int, BucketReplicas]] = {}  # per physical id: buckets kept on several servers
        # (table id, schema id) -> the schema message and schema of batches already checked against it
        self._accepted_schemas: dict[tuple[int, int], tuple[bytes, pa.Schema]] = {}
        self._lock = threading.Lock()
        self.waiters = FetchWaiters(max_parked_polls)
        self._closing = False
        self._ready = threading.Event()
        # Set from the coordinator's key when this server registers, before it is ready.
        self.writer_tokens: WriterTokens | None = None

    # readiness

    def mark_ready(self) -> None:
        """The coordinator has told this server its buckets and their lake offsets (registration)."""
        self._ready.set()

    def check_ready(self) -> None:
        """Fetches and offset lookups wait for :meth:`mark_ready`: before it, a fetch below the local
        start would be answered "out of range" where the lake holds the offset."""
        if not self._ready.is_set():
            raise ServerNotReadyError(
                f"tablet server {self.server_id} is starting: it has not learned its buckets and lake offsets "
                "from the coordinator yet; retry"
            )

    # leadership

    def become_leader(self, assignments: Sequence[TableAssignment]) -> None:
        """Lead the buckets assigned here, and copy those of which this server is a follower; each
        assignment is a table's or a partition's, keyed by its physical id (see ``TableInfo.physical_id``)."""
        for assignment in assignments:
            info = assignment.info
            fenced = {b for b, leader in assignment.leaders.items() if leader == fenced_leader(self.server_id)}
            mine = {b for b, leader in assignment.leaders.items() if leader == self.server_id} | fenced
            followed = {
                b for b, copies in assignment.replicas.items() if self.server_id in copies.replicas and b not in mine and b in assignment.leaders
            }
            # Copying stops before a bucket counts as led here: a fetcher may still be cutting the copy
            # to an old leader's history, and that cut would take back what this leader appends.
            self.replication.stop_copying((info.physical_id, bucket) for bucket in mine)
            with self._lock:
                self._tables[info.physical_id] = info
                self._led[info.physical_id] = mine
                self._copies[info.physical_id] = assignment.replicas
                newly_fenced = fenced - self._fenced.get(info.physical_id, set())
                self._fenced[info.physical_id] = fenced
            partition_of = None if info.partition_id is None else info.table_id
            tablets = {bucket: self._logs.get_or_create(info.physical_id, bucket, info.label, partition_of) for bucket in sorted(mine)}
            for bucket in sorted(newly_fenced):  # the coordinator reads the high watermark next: make it final
                tablets[bucket].settle()
                if len(assignment.replicas_of(bucket).replicas) > 1:  # and held by every in-sync replica
                    tablets[bucket].wait_for_high_watermark(tablets[bucket].log_end_offset, FENCE_REPLICATION_WAIT_S, lambda: True)
            for bucket, tablet in tablets.items():
                self.replication.lead(info, bucket, tablet, assignment.replicas.get(bucket))
            copies = {bucket: self._logs.get_or_create(info.physical_id, bucket, info.label, partition_of) for bucket in sorted(followed)}
            if copies:
                self.replication.follow(info, copies, assignment.leaders, assignment.replicas)
            self._remote.lead(info, list(tablets.values()))
            if mine:
                log.info("leading %s buckets %s", info.label, sorted(mine))
            if followed:
                log.info("following %s buckets %s", info.label, {b: assignment.leaders[b] for b in sorted(followed)})

    def knows(self, physical_id: int) -> bool:
        """Whether the table or partition is known here: looking it up asks no one."""
        with self._lock:
            return physical_id in self._tables

    def physical_id(self, table_id: int, partition_id: int) -> int:
        """The id a request's buckets are kept under: ``partition_id`` (> 0) when it names a
        partition, which must then belong to ``table_id``, else ``table_id``."""
        if partition_id <= 0:
            return table_id
        try:
            info = self._table(partition_id)
        except TableNotExistError:
            raise PartitionNotExistError(f"table id {table_id} has no partition with id {partition_id} (dropped?)") from None
        if info.table_id != table_id or info.partition_id != partition_id:
            raise PartitionNotExistError(f"table id {table_id} has no partition with id {partition_id}")
        return partition_id

    def drop_tables(self, table_ids: Sequence[int]) -> None:
        """Drop the logs of tables and partitions, by their physical ids."""
        for table_id in table_ids:
            with self._lock:
                info = self._tables.pop(table_id, None)
                self._led.pop(table_id, None)
                self._fenced.pop(table_id, None)
                self._copies.pop(table_id, None)
                for key in [key for key in self._accepted_schemas if key[0] == table_id]:
                    del self._accepted_schemas[key]
            if info is not None:
                for bucket in range(info.buckets):
                    self.replication.let_go((table_id, bucket))
            self._remote.drop_table(table_id)
            self.lake.drop_table(table_id)
            self._logs.drop_table(table_id)
            self.waiters.forget(table_id)
            if info is not None:
                log.info("dropped the logs of %s (id %d)", info.label, table_id)

    def led_tables(self) -> list[tuple[TableInfo, list[int]]]:
        """Each table this server leads buckets of, with those buckets: what metrics describe."""
        with self._lock:
            return [(self._tables[t], sorted(buckets)) for t, buckets in self._led.items() if buckets and t in self._tables]

    def table_name(self, table_id: int) -> str:
        with self._lock:
            info = self._tables.get(table_id)
        return info.label if info else f"table {table_id}"

    @staticmethod
    def _name(info: TableInfo, bucket: int) -> str:
        return f"{info.label} bucket {bucket}"

    def _table(self, table_id: int) -> TableInfo:
        with self._lock:
            info = self._tables.get(table_id)
        if info is None and self._closing:
            raise NetworkError(f"tablet server {self.server_id} is shutting down")
        if info is None:
            self.become_leader([self._resolve(table_id)])
            with self._lock:
                info = self._tables.get(table_id)
        if info is None:
            raise TableNotExistError(f"table id {table_id} does not exist")
        return info

    def _check_high_watermark_caught_up(self, info: TableInfo, bucket: int, tablet: LogTablet) -> None:
        """A new leader's high watermark starts where it stood as a follower, behind what the old
        leader acknowledged, until its followers fetch from it: answering offsets from it then
        would show a reader an end that went back. Until it reaches the offset this leader's epoch
        began at, offsets are refused as not ready yet (retriable), as Kafka's leaders do."""
        start = self.replication.epoch_start_offset((info.physical_id, bucket))
        if start is not None and tablet.high_watermark < start:
            raise ServerNotReadyError(
                f"tablet server {self.server_id} has just become the leader of {info.label} bucket {bucket}: its high "
                f"watermark {tablet.high_watermark} has not reached {start}, where its leader epoch began"
            )

    def _tablet(self, table_id: int, bucket: int) -> tuple[TableInfo, LogTablet]:
        info = self._table(table_id)
        if info.partitioned and info.partition_id is None:
            raise PartitionNotExistError(f"{info.path} is partitioned: a request names a partition id with its bucket")
        if not 0 <= bucket < info.buckets:
            raise UnknownBucketError(f"{info.label} has no bucket {bucket} (it has buckets 0..{info.buckets - 1})")
        with self._lock:
            led = bucket in self._led.get(table_id, set())
        tablet = self._logs.get(table_id, bucket) if led else None
        if tablet is None:
            raise NotLeaderError(f"tablet server {self.server_id} does not lead {info.label} bucket {bucket}")
        return info, tablet

    def shutdown(self) -> None:
        """Answer every waiting fetch and acks=all produce now, so a stopping server holds no client
        for max_wait_ms or a produce timeout."""
        self._closing = True
        self.waiters.close()
        self.replication.stop_waiting()

    def notify_high_watermark(self, table_id: int, bucket: int) -> None:
        self.waiters.notify((table_id, bucket))

    # produce

    def produce(
        self,
        table_id: int,
        bucket: int,
        records: bytes | memoryview,
        hold_id: str = "",
        caller: str = "",
        writer_token: bytes = b"",
        acks: int = ACKS_ALL,
        timeout_ms: int = 30_000,
        pipelined: bool = False,
    ) -> ProducedAppend:
        """``hold_id``: the append is made under this barrier hold, which must be open here.
        ``caller`` (the principal) and ``writer_token`` must match the writer id of the batches.
        Returns once this log holds the records. With ``acks=all`` (-1) the answer's
        ``replicated()`` waits until every in-sync replica holds them too, up to ``timeout_ms``
        from now: a request appends all its buckets first, then waits, so their copying overlaps.
        ``pipelined``: the writer sent it behind an earlier request to the bucket (see :meth:`LogTablet.append`)."""
        info, tablet = self._tablet(table_id, bucket)
        if hold_id:
            self.holds.check(hold_id)
        where = f"produce to {info.label} bucket {bucket}"
        checked_writer = rb.NO_WRITER

        def check(buffer: memoryview, pos: int, header: rb.BatchHeader) -> None:
            nonlocal checked_writer
            self._check_batch(info, where, buffer, pos, header)
            if header.writer_id not in (rb.NO_WRITER, checked_writer):
                self._check_writer(header.writer_id, caller, writer_token, where)
                checked_writer = header.writer_id

        tracker = self.replication.admit(info, bucket, acks)
        result = tablet.append(records, check, lambda: self._refuse_if_fenced(info, bucket), pipelined)
        if tracker is None or acks != ACKS_ALL:
            return ProducedAppend(result, lambda: None)
        deadline = time.monotonic() + max(timeout_ms, 1) / 1000
        return ProducedAppend(
            result,
            lambda: self.replication.await_replicated(info, bucket, tablet, tracker, result.next_offset, deadline - time.monotonic()),
        )

    def _check_writer(self, writer_id: int, caller: str, token: bytes, where: str) -> None:
        if self.writer_tokens is None:
            self.check_ready()
            raise ServerNotReadyError(f"{where}: tablet server {self.server_id} has no writer key yet; retry")
        self.writer_tokens.check(writer_id, caller, token, where)

    def _refuse_if_fenced(self, info: TableInfo, bucket: int) -> None:
        """Checked under the log's append lock, so a fence that :meth:`become_leader` settled
        refuses every later append (see :mod:`lakelog.write_fence`)."""
        with self._lock:
            fenced = bucket in self._fenced.get(info.physical_id, set())
        if fenced:
            raise NotLeaderError(f"{self._name(info, bucket)} is being dropped: it takes no writes until the drop is done or refused")

    def _check_batch(self, info: TableInfo, where: str, records: memoryview, pos: int, header: rb.BatchHeader) -> None:
        """The batch must carry one of the table's schemas and a body that agrees with its header
        (called by the log once its framing and CRC passed). Attributes are the server's to set (a
        projected batch is one it made)."""
        if header.attributes:
            raise InvalidRecordError(f"{where}: batch at byte {pos} has attributes {header.attributes:#x}; a producer sets none")
        rb.check_body(records, pos, header, self._batch_schema(info, where, records, pos, header), where)

    def _batch_schema(self, info: TableInfo, where: str, records: memoryview, pos: int, header: rb.BatchHeader) -> pa.Schema:
        """The batch's schema, checked: the current one for the current schema id, else one of
        the shape every older version has (see :mod:`lakelog.schema_evolution`). A schema message
        byte-equal to one accepted before for this schema id is not parsed again."""
        if header.schema_id > info.schema_id:  # altered since this server learned the table
            info = self._refresh(info)
        if not 1 <= header.schema_id <= info.schema_id:
            raise SchemaMismatchError(f"{where}: batch has schema id {header.schema_id}; the table's are 1..{info.schema_id}")
        message = rb.schema_message(records, pos, header)
        key = (info.table_id, header.schema_id)
        accepted = self._accepted_schemas.get(key)
        if message is not None and accepted is not None and accepted[0] == message:
            return accepted[1]
        try:
            schema = rb.decode_schema(records, pos, header)
        except (pa.ArrowInvalid, OSError) as exc:
            raise CorruptRecordError(f"{where}: batch at byte {pos} is not Arrow IPC: {exc}") from None
        if header.schema_id == info.schema_id and not schema.equals(info.schema, check_metadata=False):
            raise SchemaMismatchError(f"{where}: batch schema {schema} does not match table schema {info.schema}")
        check_readable(schema, info.schema, where)
        if message is not None:
            self._accepted_schemas[key] = (message, schema)
        return schema

    def _refresh(self, info: TableInfo) -> TableInfo:
        """The table's (or partition's) info as the coordinator has it now."""
        fresh = self._resolve(info.physical_id).info
        with self._lock:
            if info.physical_id in self._tables:
                self._tables[info.physical_id] = fresh
        log.info("%s: learned schema %d from the coordinator", fresh.label, fresh.schema_id)
        return fresh

    # fetch

    @staticmethod
    def check_fetch(params: FetchParams) -> None:
        if params.max_bytes <= 0 or params.min_bytes < 0 or params.max_wait_ms < 0:
            raise InvalidRequestError(
                f"fetch needs max_bytes > 0, min_bytes >= 0 and max_wait_ms >= 0, got "
                f"{params.max_bytes}, {params.min_bytes}, {params.max_wait_ms}"
            )

    def fetch_complete(self, params: FetchParams, results: Sequence[BucketFetchResult]) -> bool:
        """Whether ``results`` answer the fetch now: ``min_bytes`` read, or an error or a remote
        or lake answer (waiting would not change those), or the server is stopping."""
        if self._closing or sum(len(r.records) for r in results) >= params.min_bytes:
            return True
        return any(r.error or r.remote_log_fetch_info or r.lake_log_fetch_info for r in results)

    def read_fetch(self, params: FetchParams) -> list[BucketFetchResult]:
        """One read of every bucket of a fetch, without waiting."""
        budget = params.max_bytes
        results = []
        # One projection per table and fetch: its buckets share the layouts it works out.
        projections: dict[int, BatchProjection | None] = {}

        def projection_of(table_id: int, info: TableInfo) -> BatchProjection | None:
            if table_id not in projections:
                wanted = params.projections.get(table_id)
                if wanted and max(wanted) >= len(info.schema):  # a column added since this server learned the table
                    info = self._refresh(info)
                projections[table_id] = BatchProjection(check_projection(info.schema, wanted, str(info.path))) if wanted else None
            return projections[table_id]

        for request in params.buckets:
            result = self._read_one(request, projection_of, budget, params.enable_lake, params.follower_id)
            budget = max(budget - len(result.records), 0)
            results.append(result)
        return results

    def _read_one(
        self,
        request: BucketFetch,
        projection_of: Callable[[int, TableInfo], BatchProjection | None],
        budget: int,
        enable_lake: bool,
        follower_id: int,
    ) -> BucketFetchResult:
        try:
            if request.fetch_offset < 0 or request.max_bytes <= 0:
                raise InvalidRequestError(
                    f"bucket {request.bucket}: fetch_offset must be >= 0 and max_fetch_bytes > 0, got "
                    f"{request.fetch_offset} and {request.max_bytes}"
                )
            info, tablet = self._tablet(request.table_id, request.bucket)
            if follower_id >= 0:
                return self._read_for_follower(request, info, tablet, follower_id, budget)
            columns = projection_of(request.table_id, info)
            if request.fetch_offset < tablet.log_start_offset:
                return self._read_below_local(request, tablet, enable_lake)
            earliest = self._earliest(request.table_id, request.bucket, tablet, enable_lake=enable_lake)
            if budget <= 0:
                return BucketFetchResult(request.table_id, request.bucket, b"", tablet.high_watermark, earliest)
            try:
                read = tablet.read(request.fetch_offset, min(request.max_bytes, budget), columns)
            except OffsetOutOfRangeError:
                if request.fetch_offset < tablet.log_start_offset:  # local retention ran meanwhile
                    return self._read_below_local(request, tablet, enable_lake)
                raise
            except CorruptRecordError as error:
                # A quarantined segment: served from the remote copy, or the lake once that expired.
                elsewhere = self._read_elsewhere(request, tablet, enable_lake)
                if elsewhere is not None:
                    return elsewhere
                raise CorruptRecordError(f"{self._name(info, request.bucket)}: {error.message}") from None
            return BucketFetchResult(request.table_id, request.bucket, read.records, read.high_watermark, earliest)
        except LakelogError as error:
            return self._failed(request, error, enable_lake)

    def _read_for_follower(self, request: BucketFetch, info: TableInfo, tablet: LogTablet, follower_id: int, budget: int) -> BucketFetchResult:
        """A follower's fetch: its progress counted, then the leader's batches past the high
        watermark, up to the end of one leader epoch. Below the local log start it is told where
        the local log starts (it copies from there: remote storage is not copied back)."""
        try:
            self.replication.follower_fetched(info, request.bucket, follower_id, request.leader_epoch, request.fetch_offset, tablet)
            read, epoch = tablet.read_for_follower(request.fetch_offset, min(request.max_bytes, budget) if budget > 0 else 0)
        except OffsetOutOfRangeError as error:
            # Answered with the local log start, not the earliest offset of any tier that a reader
            # gets: a copy emptied (a wiped disk) starts over there, or it would ask for offset 0
            # forever; with the writers as of there, which the records it copies cannot tell it.
            start, writers = error.earliest, b""
            if request.fetch_offset < error.earliest:
                start, writers = tablet.writers_at_log_start()
                log.info(
                    "follower %d of %s bucket %d fetches offset %d, below this log's start: it starts over at %d",
                    follower_id, info.label, request.bucket, request.fetch_offset, start,
                )
            return BucketFetchResult(
                request.table_id, request.bucket, high_watermark=tablet.high_watermark, log_start_offset=start, error=error,
                writer_state=writers,
            )
        return BucketFetchResult(
            request.table_id, request.bucket, read.records, read.high_watermark, read.log_start_offset,
            leader_epoch=epoch, starts_segment=read.starts_segment,
        )

    def end_offset_for_epoch(self, table_id: int, bucket: int, epoch: int) -> tuple[int, int]:
        info, tablet = self._tablet(table_id, bucket)
        return self.replication.end_offset_for_epoch(info, bucket, tablet, epoch)

    def isr_changes(self) -> list[IsrChange]:
        def high_watermark(key: tuple[int, int]) -> int | None:
            tablet = self._logs.get(*key)
            return None if tablet is None else tablet.high_watermark

        return self.replication.isr_changes(high_watermark)

    def apply_isr(self, change: IsrChange, copies: BucketReplicas) -> None:
        tablet = self._logs.get(change.info.physical_id, change.bucket)
        if tablet is not None:
            self.replication.apply_isr(change, copies, tablet)

    def _read_below_local(self, request: BucketFetch, tablet: LogTablet, enable_lake: bool) -> BucketFetchResult:
        """A fetch below the local log start: the remote segments holding it, else (when the
        request enables it) the lake snapshot holding it, else out of range."""
        found = self._read_elsewhere(request, tablet, enable_lake)
        if found is None:
            earliest = self._earliest(request.table_id, request.bucket, tablet, enable_lake=enable_lake)
            raise OffsetOutOfRangeError(request.bucket, request.fetch_offset, earliest)
        return found

    def _read_elsewhere(self, request: BucketFetch, tablet: LogTablet, enable_lake: bool) -> BucketFetchResult | None:
        """Where an offset the local log cannot serve lives: the remote segments holding it, else
        (when the request enables it) the lake snapshot holding it, else None."""
        earliest = self._earliest(request.table_id, request.bucket, tablet, enable_lake=enable_lake)
        result = BucketFetchResult(
            request.table_id, request.bucket, high_watermark=tablet.high_watermark, log_start_offset=earliest
        )
        fetch_info = self._remote.fetch_info(request.table_id, request.bucket, request.fetch_offset)
        if fetch_info is not None:
            return replace(result, remote_log_fetch_info=fetch_info)
        lake = self.lake.get(request.table_id, request.bucket) if enable_lake else None
        if lake is not None and lake.start_offset <= request.fetch_offset < lake.end_offset:
            return replace(result, lake_log_fetch_info=LakeLogFetchInfo(lake.snapshot_id, lake.end_offset))
        return None

    def _earliest(
        self,
        table_id: int,
        bucket: int,
        tablet: LogTablet,
        manifest: RemoteLogManifest | None = None,
        enable_lake: bool = False,
    ) -> int:
        """The earliest offset any tier can serve; ``manifest`` defaults to the remote segments as
        last seen, so answering this never waits on remote storage."""
        remote_start = (manifest if manifest is not None else self._remote.known_manifest(table_id, bucket)).start_offset
        earliest = tablet.log_start_offset if remote_start < 0 else min(remote_start, tablet.log_start_offset)
        lake = self.lake.get(table_id, bucket) if enable_lake else None
        return min(earliest, lake.start_offset) if lake is not None else earliest

    def _failed(self, request: BucketFetch, error: LakelogError, enable_lake: bool = False) -> BucketFetchResult:
        tablet = self._logs.get(request.table_id, request.bucket)
        earliest = self._earliest(request.table_id, request.bucket, tablet, enable_lake=enable_lake) if tablet else -1
        if isinstance(error, OffsetOutOfRangeError):
            error = OffsetOutOfRangeError(request.bucket, request.fetch_offset, earliest)
        if not isinstance(error, InvalidRequestError):
            log.warning("fetch of %s bucket %d failed: %s", self.table_name(request.table_id), request.bucket, error)
        return BucketFetchResult(
            request.table_id,
            request.bucket,
            high_watermark=tablet.high_watermark if tablet else -1,
            log_start_offset=earliest,
            error=error,
        )

    # offsets

    def list_offset(self, table_id: int, bucket: int, spec: OffsetSpec, enable_lake: bool = False) -> OffsetAnswer:
        info, tablet = self._tablet(table_id, bucket)
        self._check_high_watermark_caught_up(info, bucket, tablet)
        if spec.type == OffsetType.EARLIEST:
            # A local log that starts at 0 is the earliest any tier can be: remote storage is not
            # asked (a list and a read per bucket the first time: seconds on S3 for a wide table's first scan).
            manifest = None if tablet.log_start_offset == 0 else self._remote.manifest(table_id, bucket)
            return OffsetAnswer(self._earliest(table_id, bucket, tablet, manifest, enable_lake))
        if spec.type == OffsetType.LATEST:
            return OffsetAnswer(tablet.high_watermark)
        if spec.type == OffsetType.TIMESTAMP:
            lake = self.lake.get(table_id, bucket) if enable_lake else None
            if lake is not None and lake.max_timestamp >= spec.ms:
                return OffsetAnswer(-1, lake.snapshot_id)
            # Remote first: it holds the offsets below the local start and those of quarantined local
            # segments (the local lookup skips their holes), and timestamps never decrease.
            below = max([tablet.log_start_offset, *(hole.end for hole in tablet.quarantined)])
            found = self._remote.lookup_offset_by_timestamp(table_id, bucket, spec.ms, below=below)
            if found is None:
                found = tablet.lookup_offset_by_timestamp(spec.ms)
            return OffsetAnswer(tablet.high_watermark if found is None else found)
        raise InvalidRequestError(f"unknown offset type {spec.type!r}")

    def server_time(self) -> int:
        """What GetServerTime answers: :meth:`LogManager.barrier_safe_time`, kept out of what the
        barrier holds forbid (see :mod:`barrier_holds`)."""
        return self.holds.safe_time(self._logs.barrier_safe_time())

    def repair(self, table_id: int, bucket: int, local: bool, accept_truncation: bool) -> str:
        """An operator's repair of a led bucket (``lakelog repair``); what it did, in words."""
        _, tablet = self._tablet(table_id, bucket)
        if not local:
            return self._remote.repair(table_id, bucket)
        if not accept_truncation:
            raise InvalidRequestError("RepairLog: a local repair needs accept_truncation, the operator's word that the lost records stay lost")
        return tablet.accept_truncation()

    def describe(self, table_id: int, bucket: int) -> BucketDescription:
        """One consistent look at a bucket: one tablet lookup, one manifest read."""
        _, tablet = self._tablet(table_id, bucket)
        manifest = self._remote.manifest(table_id, bucket)
        lake = self.lake.get(table_id, bucket)
        with self._lock:
            known = self._copies.get(table_id, {}).get(bucket)
        copies = self.replication.copies((table_id, bucket)) or known or BucketReplicas((self.server_id,), (self.server_id,))
        info = BucketInfo(
            leader=self.server_id,
            replicas=copies.replicas,
            isr=copies.isr,
            leader_epoch=copies.leader_epoch,
            high_watermark=tablet.high_watermark,
            local_log_start_offset=tablet.log_start_offset,
            remote_log_start_offset=manifest.start_offset,
            remote_log_end_offset=manifest.end_offset,
            lake_log_start_offset=lake.start_offset if lake else -1,
            lake_log_end_offset=lake.end_offset if lake else -1,
            remote_error=self._remote.remote_error(table_id, bucket),
        )
        return BucketDescription(info, len(tablet.segments), len(manifest.segments))
