"""The fetcher behind a LogScanner: one FetchLog in flight per tablet server, answers buffered.

Requests go out asynchronously, to every leader at once, and the next round is sent as soon as a
poll consumes the previous one, so the network and the servers work while the caller processes
records. A bucket with a fetch in flight or an unconsumed answer is never fetched again, and an
answer whose offset no longer matches the bucket's position (re-subscribed meanwhile) is dropped,
so no record is returned twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from dataclasses import dataclass

import grpc
import pyarrow as pa

from lakelog.config import Configuration
from lakelog.errors import CorruptRecordError, LakelogError, NetworkError, OffsetOutOfRangeError, error_from_code
from lakelog.metadata import ServerNode, TableInfo
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.status import error_from_rpc
from lakelog.client.metadata import MetadataCache
from lakelog.client.rpc_client import RpcClient
from lakelog.client.scanner.completed_fetch import decode_records
from lakelog.client.scanner.scan_records import OFFSET_COLUMN

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.2


@dataclass(frozen=True)
class CompletedFetch:
    bucket: int
    fetch_offset: int
    records: bytes = b""
    high_watermark: int = -1
    log_start_offset: int = -1
    error: LakelogError | None = None


@dataclass(frozen=True)
class FetchedBatch:
    """What one round of collecting gives the scanner."""

    tables: dict[int, pa.Table]
    high_watermarks: dict[int, int]


class LogFetcher:
    def __init__(
        self,
        info: TableInfo,
        projection: list[int] | None,
        projected_schema: pa.Schema,
        rpc: RpcClient,
        metadata: MetadataCache,
        conf: Configuration,
    ) -> None:
        self._info = info
        self._projection = projection or []
        self._schema = projected_schema
        self._rpc = rpc
        self._metadata = metadata
        self._max_bytes = conf.get("client.scanner.fetch.max-bytes")
        self._bucket_bytes = conf.get("client.scanner.fetch.max-bytes-per-bucket")
        self._max_wait_ms = conf.get("client.scanner.fetch.max-wait")
        self._min_bytes = conf.get("client.scanner.fetch.min-bytes")
        self.positions: dict[int, int] = {}
        self._in_flight: set[int] = set()
        self._completed: dict[int, CompletedFetch] = {}
        self._retry_at: dict[int, float] = {}
        self._cond = threading.Condition()
        self._stale_metadata = False

    # subscriptions

    def seek(self, bucket: int, offset: int) -> None:
        with self._cond:
            self.positions[bucket] = offset
            self._completed.pop(bucket, None)

    def unsubscribe(self, bucket: int) -> None:
        with self._cond:
            self.positions.pop(bucket, None)
            self._completed.pop(bucket, None)

    # sending

    def send_fetches(self) -> None:
        if self._stale_metadata:
            self._refresh_metadata()
        now = time.monotonic()
        by_leader: dict[ServerNode, list[tuple[int, int]]] = defaultdict(list)
        with self._cond:
            for bucket, offset in self.positions.items():
                if bucket in self._in_flight or bucket in self._completed or self._retry_at.get(bucket, 0) > now:
                    continue
                try:
                    node = self._metadata.leader(self._info.table_id, bucket)
                except LakelogError as error:
                    self._completed[bucket] = CompletedFetch(bucket, offset, error=error)
                    continue
                by_leader[node].append((bucket, offset))
            for group in by_leader.values():
                self._in_flight.update(bucket for bucket, _ in group)
        for node, group in by_leader.items():
            self._send(node, group)

    def _send(self, node: ServerNode, group: list[tuple[int, int]]) -> None:
        request = pb.FetchLogRequest(
            follower_server_id=-1,
            max_bytes=self._max_bytes,
            max_wait_ms=self._max_wait_ms,
            min_bytes=self._min_bytes,
            tables_req=[
                pb.PbFetchLogReqForTable(
                    table_id=self._info.table_id,
                    projected_fields=self._projection,
                    buckets_req=[
                        pb.PbFetchLogReqForBucket(bucket_id=b, fetch_offset=o, max_fetch_bytes=self._bucket_bytes)
                        for b, o in group
                    ],
                )
            ],
        )
        timeout = self._rpc.timeout_s + self._max_wait_ms / 1000
        try:
            future = self._rpc.tablet(node.address).FetchLog.future(request, timeout=timeout)
        except LakelogError as error:
            self._complete([CompletedFetch(b, o, error=error) for b, o in group])
            return
        future.add_done_callback(lambda f: self._on_response(f, node, group))

    def _on_response(self, future: grpc.Future, node: ServerNode, group: list[tuple[int, int]]) -> None:
        try:
            response = future.result()
        except grpc.RpcError as exc:
            error = error_from_rpc(exc, f"tablet server {node.address}")
            self._complete([CompletedFetch(b, o, error=error) for b, o in group])
            return
        offsets = dict(group)
        completed = []
        for table in response.tables_resp:
            for item in table.buckets_resp:
                error = error_from_code(item.error_code, item.error_message) if item.error_code else None
                completed.append(
                    CompletedFetch(
                        item.bucket_id,
                        offsets.get(item.bucket_id, -1),
                        item.records,
                        item.high_watermark,
                        item.log_start_offset,
                        error,
                    )
                )
        self._complete(completed)

    def _complete(self, completed: list[CompletedFetch]) -> None:
        with self._cond:
            for fetch in completed:
                self._in_flight.discard(fetch.bucket)
                if self.positions.get(fetch.bucket) == fetch.fetch_offset:
                    self._completed[fetch.bucket] = fetch
            self._cond.notify_all()

    # collecting

    def wait(self, timeout_s: float) -> None:
        with self._cond:
            if not self._completed:
                self._cond.wait(timeout_s)

    def collect(self) -> FetchedBatch:
        """Decode every buffered answer and advance positions over the records returned."""
        with self._cond:
            completed, self._completed = self._completed, {}
        tables: dict[int, pa.Table] = {}
        high_watermarks: dict[int, int] = {}
        try:
            for bucket, fetch in sorted(completed.items()):
                del completed[bucket]
                if fetch.error is not None:
                    self._handle_error(fetch)
                    continue
                high_watermarks[bucket] = fetch.high_watermark
                if not fetch.records:
                    continue
                table = decode_records(
                    fetch.records, bucket, fetch.fetch_offset, self._schema, f"{self._info.path} bucket {bucket}"
                )
                if table.num_rows:
                    self._check_contiguous(bucket, fetch.fetch_offset, table)
                    with self._cond:
                        if self.positions.get(bucket) != fetch.fetch_offset:
                            continue
                        self.positions[bucket] = fetch.fetch_offset + table.num_rows
                    tables[bucket] = table
        finally:
            with self._cond:
                for bucket, fetch in completed.items():
                    self._completed.setdefault(bucket, fetch)
        return FetchedBatch(tables, high_watermarks)

    def _check_contiguous(self, bucket: int, fetch_offset: int, table: pa.Table) -> None:
        offsets = table.column(OFFSET_COLUMN)
        first, last = offsets[0].as_py(), offsets[-1].as_py()
        if first != fetch_offset or last != fetch_offset + table.num_rows - 1:
            raise CorruptRecordError(
                f"{self._info.path} bucket {bucket}: fetch at offset {fetch_offset} returned offsets "
                f"{first}..{last} for {table.num_rows} records (a gap or an overlap)"
            )

    def _handle_error(self, fetch: CompletedFetch) -> None:
        error = fetch.error
        assert error is not None
        if isinstance(error, OffsetOutOfRangeError):
            raise OffsetOutOfRangeError(fetch.bucket, fetch.fetch_offset, fetch.log_start_offset)
        if not error.retriable and not isinstance(error, NetworkError):
            raise error
        log.info("fetch of %s bucket %d will be retried: %s", self._info.path, fetch.bucket, error)
        self._retry_at[fetch.bucket] = time.monotonic() + RETRY_BACKOFF_S
        self._stale_metadata = True

    def _refresh_metadata(self) -> None:
        try:
            self._metadata.refresh(self._info.table_id)
            self._stale_metadata = False
        except LakelogError as error:
            log.info("metadata refresh of %s failed, will retry: %s", self._info.path, error)
