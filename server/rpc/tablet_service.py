"""TabletService over gRPC: translate, call :class:`ReplicaManager`, translate back."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field, replace

import grpc

from lakelog.errors import InvalidRequestError, LakelogError
from lakelog.metadata import MAX_BUCKETS, OffsetSpec, OffsetType
from lakelog.rpc import codec
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceServicer
from lakelog.server.metrics.server_metrics import ServerMetrics
from lakelog.server.replica.replica_manager import BucketFetch, BucketFetchResult, FetchParams, ProducedAppend, ReplicaManager
from lakelog.server.rpc.answer_budget import AnswerBudget
from lakelog.server.rpc.auth_interceptor import CallerName
from lakelog.server.rpc.cluster_secret import presents_cluster_secret
from lakelog.server.rpc.error_boundary import rpc_method
from lakelog.server.rpc.fetch_response import encode_fetch_response
from lakelog.server.rpc.grpc_server import RpcServer, add_servicer
from lakelog.server.rpc.replica_stream_frames import REPLICA_STREAM_PORT_KEY
from lakelog.server.rpc.produce_request import BucketRecords, ProduceRequest, parse_produce_request
from lakelog.server.rpc.request_checks import check_notified_offsets

log = logging.getLogger(__name__)


# Bytes of an answer besides its records, per bucket (error message, remote segment list): reserved too.
ANSWER_OVERHEAD = 4096
# How long an acks=all produce waits for the in-sync replicas when its request names no timeout.
DEFAULT_PRODUCE_TIMEOUT_MS = 30_000
# Buckets one FetchLog (or ListOffsets, DescribeLogBuckets, RepairLog) may name: a table's most.
# Each costs a read and an answer's overhead, so a FetchLog naming 100,000 would take a minute of
# server time; lakelog's client asks for each table (or partition) apart, so its requests stay within this.
MAX_FETCH_BUCKETS = MAX_BUCKETS


def _check_bucket_count(method: str, asked: int) -> None:
    """Refuse a request naming more buckets than ``MAX_FETCH_BUCKETS``, before any work."""
    if asked > MAX_FETCH_BUCKETS:
        raise InvalidRequestError(f"{method} names {asked} buckets, at most {MAX_FETCH_BUCKETS}: split it into requests of fewer")


@dataclass(frozen=True)
class _FetchPlan:
    """A FetchLog request resolved: what was asked, in order; what to read; what was refused (by
    position in ``asked``)."""

    asked: list[tuple[pb.PbFetchLogReqForTable, pb.PbFetchLogReqForBucket]]
    params: FetchParams
    refused: dict[int, BucketFetchResult]


@dataclass
class _FetchWait:
    """A fetch between its reads: whether it may still park, and until when."""

    plan: _FetchPlan
    overhead: int  # answer bytes besides the records, reserved with them
    deadline: float  # time.monotonic()
    metrics: ServerMetrics
    may_park: bool = field(init=False)

    def __post_init__(self) -> None:
        self.may_park = not self.plan.refused  # a refused bucket is an answer already: waiting would not change it

    @property
    def keys(self) -> list[tuple[int, int]]:
        return [(b.table_id, b.bucket) for b in self.plan.params.buckets]

    def final(self) -> bool:
        """Whether the next read answers, whatever it finds."""
        return not self.may_park or time.monotonic() >= self.deadline

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def parked(self, waited: bool) -> None:
        """What parking answered: False, too many polls were parked (the next read is the answer)."""
        self.may_park = waited
        if not waited:
            self.metrics.count_unparked_poll()


def _within(plan: _FetchPlan, record_bytes: int) -> _FetchPlan:
    """The fetch reading at most ``record_bytes`` (what its connection's share of the answer budget
    allows), though never less than one batch: a fetch makes progress whatever its budget."""
    if plan.params.max_bytes <= record_bytes:
        return plan
    return replace(plan, params=replace(plan.params, max_bytes=max(record_bytes, 1)))


class TabletService(TabletServiceServicer):
    def __init__(
        self, replicas: ReplicaManager, metrics: ServerMetrics, budget: AnswerBudget, caller: CallerName, cluster_secret: str | None
    ) -> None:
        self._replicas = replicas
        self._cluster_secret = cluster_secret
        self.metrics = metrics
        self.budget = budget
        self.replica_stream_port = 0  # set once the replica stream listens (0: it does not)
        self._caller = caller
        metrics.watch_fetch_limits(lambda: budget.in_use, lambda: budget.waiting, lambda: budget.connections, lambda: replicas.waiters.parked)

    def register(self, server: RpcServer) -> None:
        add_servicer(server, self, "TabletService", serialized={"FetchLog"}, parsers={"ProduceLog": parse_produce_request})

    @rpc_method
    def ProduceLog(self, request: ProduceRequest, context: grpc.ServicerContext) -> pb.ProduceLogResponse:
        """Appends every bucket, then waits for each to be acknowledged (with ``acks=all``, copied
        by the in-sync replicas): the buckets' copying overlaps instead of adding up."""
        appended: dict[int, tuple[int, int]] = {}  # records and bytes per physical id, resent batches not counted
        physical_id = request.table_id
        caller = self._caller(context)
        produced: list[tuple[BucketRecords, int, ProducedAppend | LakelogError]] = []
        for bucket_req in request.buckets:
            try:
                physical_id = self._replicas.physical_id(request.table_id, bucket_req.partition_id)
                batches = bucket_req.records
                outcome: ProducedAppend | LakelogError = self._replicas.produce(
                    physical_id, bucket_req.bucket_id, batches, request.hold_id, caller, bucket_req.writer_token,
                    request.acks, request.timeout_ms or DEFAULT_PRODUCE_TIMEOUT_MS, bucket_req.pipelined,
                )
                if not outcome.result.duplicate:
                    records, size = appended.get(physical_id, (0, 0))
                    appended[physical_id] = (records + outcome.result.record_count, size + len(batches))
            except LakelogError as error:
                outcome = error
            produced.append((bucket_req, physical_id, outcome))
        responses = [self._acknowledged(bucket_req, physical_id, outcome) for bucket_req, physical_id, outcome in produced]
        for physical_id, (records, size) in appended.items():  # named after the appends: they make a table known here
            self.metrics.record_produce(self._replicas.table_name(physical_id), records, size)
        return pb.ProduceLogResponse(buckets_resp=responses)

    def _acknowledged(self, bucket_req: BucketRecords, physical_id: int, outcome: ProducedAppend | LakelogError) -> pb.PbProduceLogRespForBucket:
        """One bucket's answer: its offsets once acknowledged, or why not."""
        if isinstance(outcome, ProducedAppend):
            try:
                outcome.replicated()
                return pb.PbProduceLogRespForBucket(
                    partition_id=bucket_req.partition_id,
                    bucket_id=bucket_req.bucket_id,
                    base_offset=outcome.result.base_offset,
                    high_watermark=outcome.result.next_offset,
                    commit_timestamp=outcome.result.commit_timestamp,
                )
            except LakelogError as error:
                outcome = error
        log.warning("produce to %s bucket %d refused: %s", self._replicas.table_name(physical_id), bucket_req.bucket_id, outcome)
        self.metrics.count_error("ProduceLog", outcome)
        return pb.PbProduceLogRespForBucket(
            partition_id=bucket_req.partition_id, bucket_id=bucket_req.bucket_id, error_code=outcome.code, error_message=outcome.message
        )

    @rpc_method
    async def FetchLog(self, request: pb.FetchLogRequest, context: grpc.aio.ServicerContext) -> bytes:
        """Answers a serialized ``FetchLogResponse`` (see :mod:`fetch_response`). A follower's fetch
        is told, in the trailing metadata, where this server's replica stream listens: its next
        fetches go there (:mod:`lakelog.server.rpc.replica_stream_server`)."""
        # Only a cluster member reads past the high watermark as a follower; anyone else naming a
        # follower id reads as a client.
        follower = (
            request.HasField("follower_server_id")
            and request.follower_server_id >= 0
            and presents_cluster_secret(context.invocation_metadata(), self._cluster_secret)
        )
        connection = context.peer()
        answer, kept = await self.answer_fetch(request, follower, connection)
        context.add_done_callback(lambda _: self.budget.release(kept, connection))
        if follower and self.replica_stream_port:
            context.set_trailing_metadata(((REPLICA_STREAM_PORT_KEY, str(self.replica_stream_port)),))
        return answer

    async def answer_fetch(self, request: pb.FetchLogRequest, follower: bool, connection: str) -> tuple[bytes, int]:
        """A fetch's serialized answer and the answer budget it keeps, which the caller gives back
        (``budget.release(kept, connection)``) once the answer is sent or dropped. Runs on the RPC
        event loop: it waits for answer budget and for data there, holding no thread; it resolves
        partitions (which may ask the coordinator), reads and encodes in an RPC thread."""
        loop = asyncio.get_running_loop()
        if self._asks_coordinator(request):
            wait = await loop.run_in_executor(None, self._fetch_wait, request, follower)
        else:
            wait = self._fetch_wait(request, follower)
        plan, overhead = wait.plan, wait.overhead
        bound = plan.params.answer_bound() + overhead
        while True:
            seen = self._replicas.waiters.arrivals()
            reserved = await self.budget.acquire(bound, connection)
            kept = 0
            try:
                results, answer = await loop.run_in_executor(None, self._read, _within(plan, reserved - overhead), wait.final())
                if answer is not None:
                    kept = min(reserved, len(answer))
            finally:
                self.budget.release(reserved - kept, connection)
            if answer is not None:
                break
            wait.parked(await self._replicas.waiters.park(wait.keys, seen, wait.left()))
        self._count(plan, results)
        return answer, kept

    def answer_follower_fetch(self, request: pb.FetchLogRequest) -> bytes:
        """:meth:`answer_fetch` for a follower's replica stream, in the stream's own thread: read,
        waited for and answered there, without the event loop's hops that each fetch would wait
        behind (an ``acks=all`` produce waits for the fetches that follow it). Outside the answer
        budget: only cluster members open a stream, each with one fetch at a time."""
        wait = self._fetch_wait(request, follower=True)
        while True:
            seen = self._replicas.waiters.arrivals()
            results, answer = self._read(wait.plan, wait.final())
            if answer is not None:
                break
            wait.parked(self._replicas.waiters.park_thread(wait.keys, seen, wait.left()))
        self._count(wait.plan, results)
        return answer

    def _fetch_wait(self, request: pb.FetchLogRequest, follower: bool) -> _FetchWait:
        _check_bucket_count("FetchLog", sum(len(table.buckets_req) for table in request.tables_req))
        self._replicas.check_ready()
        plan = self._plan(request, follower)
        self._replicas.check_fetch(plan.params)
        return _FetchWait(plan, ANSWER_OVERHEAD * (len(plan.asked) + 1), time.monotonic() + plan.params.max_wait_ms / 1000, self.metrics)

    def _count(self, plan: _FetchPlan, results: list[BucketFetchResult]) -> None:
        for result in [*results, *plan.refused.values()]:
            self.metrics.record_fetch(result)

    def _asks_coordinator(self, request: pb.FetchLogRequest) -> bool:
        """Whether resolving the request may ask the coordinator: it names a partition not known here yet."""
        return any(b.partition_id > 0 and not self._replicas.knows(b.partition_id) for t in request.tables_req for b in t.buckets_req)

    def _plan(self, request: pb.FetchLogRequest, follower: bool) -> _FetchPlan:
        """The buckets to read, each under its physical id; a partition not (any more) here is
        refused by position."""
        asked = [(table, b) for table in request.tables_req for b in table.buckets_req]
        buckets: list[BucketFetch] = []
        projections: dict[int, list[int]] = {}
        refused: dict[int, BucketFetchResult] = {}
        for index, (table, b) in enumerate(asked):
            try:
                physical_id = self._replicas.physical_id(table.table_id, b.partition_id)
            except LakelogError as error:
                refused[index] = BucketFetchResult(table.table_id, b.bucket_id, error=error)
                continue
            buckets.append(BucketFetch(physical_id, b.bucket_id, b.fetch_offset, b.max_fetch_bytes, b.leader_epoch))
            projections[physical_id] = list(table.projected_fields)
        params = FetchParams(
            buckets=buckets,
            projections=projections,
            max_bytes=request.max_bytes,
            min_bytes=request.min_bytes,
            max_wait_ms=min(request.max_wait_ms, 60_000),
            enable_lake=request.enable_lake,
            follower_id=request.follower_server_id if follower else -1,
        )
        return _FetchPlan(asked, params, refused)

    def _read(self, plan: _FetchPlan, final: bool) -> tuple[list[BucketFetchResult], bytes | None]:
        """One read of the fetch (in an RPC thread), and its encoded answer when it is one: when
        ``final`` or when waiting would not change it."""
        results = self._replicas.read_fetch(plan.params) if plan.params.buckets else []
        if not final and not self._replicas.fetch_complete(plan.params, results):
            return results, None
        return results, encode_fetch_response(self._answers(plan.asked, plan.refused, results))

    @staticmethod
    def _answers(
        asked: list[tuple[pb.PbFetchLogReqForTable, pb.PbFetchLogReqForBucket]],
        refused: dict[int, BucketFetchResult],
        results: list[BucketFetchResult],
    ) -> list[tuple[int, pb.PbFetchLogRespForBucket, bytes]]:
        """Answers in the order asked, under the table id asked (a partition's buckets are read
        under its own id but answered under its table's, with the partition id)."""
        read = iter(results)
        answers = []
        for index, (table, b) in enumerate(asked):
            result = refused[index] if index in refused else next(read)
            answer = pb.PbFetchLogRespForBucket(
                partition_id=b.partition_id,
                bucket_id=result.bucket,
                fetch_offset=b.fetch_offset,
                error_code=result.error.code if result.error else 0,
                error_message=result.error.message if result.error else "",
                high_watermark=result.high_watermark,
                log_start_offset=result.log_start_offset,
                remote_log_fetch_info=codec.remote_fetch_info_to_pb(result.remote_log_fetch_info),
                lake_log_fetch_info=codec.lake_fetch_info_to_pb(result.lake_log_fetch_info),
                leader_epoch=result.leader_epoch,
                starts_segment=result.starts_segment,
                writer_state=result.writer_state,
            )
            answers.append((table.table_id, answer, result.records))
        return answers

    @rpc_method
    def ListOffsets(self, request: pb.ListOffsetsRequest, context: grpc.ServicerContext) -> pb.ListOffsetsResponse:
        asked = [(request.partition_id, request.bucket_id), *((p.partition_id, p.bucket_id) for p in request.partitions_req)]
        _check_bucket_count("ListOffsets", sum(len(buckets) for _, buckets in asked))
        self._replicas.check_ready()
        if request.offset_type not in tuple(OffsetType):
            raise InvalidRequestError(f"unknown offset_type {request.offset_type}")
        spec = OffsetSpec(OffsetType(request.offset_type), request.start_timestamp)
        responses = []
        for partition_id, buckets in asked:
            for bucket in buckets:
                try:
                    physical_id = self._replicas.physical_id(request.table_id, partition_id)
                    answer = self._replicas.list_offset(physical_id, bucket, spec, request.enable_lake)
                    responses.append(
                        pb.PbListOffsetsRespForBucket(
                            bucket_id=bucket, offset=answer.offset, lake_snapshot_id=answer.lake_snapshot_id, partition_id=partition_id
                        )
                    )
                except LakelogError as error:
                    self.metrics.count_error("ListOffsets", error)
                    responses.append(
                        pb.PbListOffsetsRespForBucket(
                            bucket_id=bucket, error_code=error.code, error_message=error.message, partition_id=partition_id
                        )
                    )
        return pb.ListOffsetsResponse(buckets_resp=responses)

    @rpc_method
    def DescribeLogBuckets(
        self, request: pb.DescribeLogBucketsRequest, context: grpc.ServicerContext
    ) -> pb.DescribeLogBucketsResponse:
        _check_bucket_count("DescribeLogBuckets", len(request.bucket_id))
        responses = []
        for bucket in request.bucket_id:
            try:
                described = self._replicas.describe(self._replicas.physical_id(request.table_id, request.partition_id), bucket)
                responses.append(
                    codec.bucket_info_to_pb(bucket, described.info, described.local_segments, described.remote_segments)
                )
            except LakelogError as error:
                self.metrics.count_error("DescribeLogBuckets", error)
                responses.append(pb.PbLogBucketInfo(bucket_id=bucket, error_code=error.code, error_message=error.message))
        return pb.DescribeLogBucketsResponse(buckets=responses)

    @rpc_method
    def RepairLog(self, request: pb.RepairLogRequest, context: grpc.ServicerContext) -> pb.RepairLogResponse:
        _check_bucket_count("RepairLog", len(request.bucket_id))
        if request.tier not in pb.RepairTier.values():
            raise InvalidRequestError(f"RepairLog: unknown tier {request.tier}")
        responses = []
        for bucket in request.bucket_id:
            try:
                summary = self._replicas.repair(
                    self._replicas.physical_id(request.table_id, request.partition_id), bucket, request.tier == pb.REPAIR_LOCAL, request.accept_truncation
                )
                responses.append(pb.PbRepairLogRespForBucket(bucket_id=bucket, summary=summary))
            except LakelogError as error:
                self.metrics.count_error("RepairLog", error)
                responses.append(pb.PbRepairLogRespForBucket(bucket_id=bucket, error_code=error.code, error_message=error.message))
        return pb.RepairLogResponse(buckets=responses)

    @rpc_method
    def GetServerTime(self, request: pb.GetServerTimeRequest, context: grpc.ServicerContext) -> pb.GetServerTimeResponse:
        return pb.GetServerTimeResponse(server_time_ms=self._replicas.server_time())

    @rpc_method
    def OpenBarrierHold(self, request: pb.OpenBarrierHoldRequest, context: grpc.ServicerContext) -> pb.OpenBarrierHoldResponse:
        return pb.OpenBarrierHoldResponse(start_ms=self._replicas.holds.open(request.hold_id, request.timeout_ms, request.start_ms))

    @rpc_method
    def CloseBarrierHold(self, request: pb.CloseBarrierHoldRequest, context: grpc.ServicerContext) -> pb.CloseBarrierHoldResponse:
        self._replicas.holds.close(request.hold_id, request.release_after_ms)
        return pb.CloseBarrierHoldResponse()

    @rpc_method
    def NotifyLeaderAndIsr(
        self, request: pb.NotifyLeaderAndIsrRequest, context: grpc.ServicerContext
    ) -> pb.NotifyLeaderAndIsrResponse:
        assignments = [codec.table_metadata_from_pb(m) for m in request.table_metadata]
        self._replicas.become_leader(assignments)
        self._replicas.drop_tables(list(request.dropped_table_id))
        return pb.NotifyLeaderAndIsrResponse()

    @rpc_method
    def OffsetForLeaderEpoch(
        self, request: pb.OffsetForLeaderEpochRequest, context: grpc.ServicerContext
    ) -> pb.OffsetForLeaderEpochResponse:
        epoch, end = self._replicas.end_offset_for_epoch(request.table_id, request.bucket_id, request.leader_epoch)
        return pb.OffsetForLeaderEpochResponse(leader_epoch=epoch, end_offset=end)

    @rpc_method
    def NotifyLakeTableOffset(
        self, request: pb.NotifyLakeTableOffsetRequest, context: grpc.ServicerContext
    ) -> pb.NotifyLakeTableOffsetResponse:
        tables = {info.physical_id: info.buckets for info, _ in self._replicas.led_tables()}
        check_notified_offsets("NotifyLakeTableOffset", request.notify_buckets_req, tables)
        self._replicas.lake.update(codec.lake_offsets_from_pb(request))
        return pb.NotifyLakeTableOffsetResponse()
