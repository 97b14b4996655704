"""The metric families of one server process, in a registry of its own.

A registry per process, not prometheus_client's global one, so that several servers in one Python
process (the tests, an embedded demo) keep separate counts. Everything here moves with events
(calls, appends, fetch answers, lake commits), some on the hot path, so an update is an increment
under a mutex held for nothing else, children bound once where the labels are fixed; the gauges that
describe state (segments, lags) are computed at scrape time by collectors registered on
:attr:`ServerMetrics.registry`.
"""

from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from lakelog.errors import LakelogError
from lakelog.server.replica.replica_manager import BucketFetchResult
from lakelog.version import __version__

# From a local fetch answered at once to a long poll held for its max wait (60 s at most).
RPC_SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class ServerMetrics:
    """What a coordinator and a tablet server count. Method names label the RPC families without
    their service: the two services share no method name."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        Info("lakelog_build", "The lakelog version this server runs.", registry=registry).info({"version": __version__})
        self._rpc_duration = Histogram(
            "lakelog_rpc_duration_seconds",
            "Time an RPC handler took, failures and long-poll waits included.",
            ["method"],
            buckets=RPC_SECONDS_BUCKETS,
            registry=registry,
        )
        self._rpc_errors = Counter(
            "lakelog_rpc_errors",
            "Errors answered: grpc_status is the status of a failed call, OK for an error one bucket "
            "or table of a successful call carries in its response.",
            ["method", "error", "code", "grpc_status"],
            registry=registry,
        )
        self._produce_records = Counter(
            "lakelog_produce_records", "Records appended to the local log.", ["table"], registry=registry
        )
        self._produce_bytes = Counter(
            "lakelog_produce_bytes", "Record batch bytes appended to the local log.", ["table"], registry=registry
        )
        fetch_answers = Counter(
            "lakelog_fetch_answers",
            "FetchLog bucket answers by the tier that serves them: local records, remote segments "
            "for the client to read, or a lake snapshot.",
            ["tier"],
            registry=registry,
        )
        fetch_bytes = Counter(
            "lakelog_fetch_bytes",
            "local: record bytes sent; remote: sizes of the remote segments handed out.",
            ["tier"],
            registry=registry,
        )
        self._local_answers, self._remote_answers, self._lake_answers = (
            fetch_answers.labels(tier) for tier in ("local", "remote", "lake")
        )
        self._local_bytes, self._remote_bytes = (fetch_bytes.labels(tier) for tier in ("local", "remote"))
        self._remote_segments = Counter(
            "lakelog_fetch_remote_segments", "Remote segments handed out by FetchLog answers.", registry=registry
        )
        self._lake_commits = Counter(
            "lakelog_lake_commits", "Lake snapshots the coordinator accepted from tiering jobs.", ["table"], registry=registry
        )
        self._lake_tiered_records = Counter(
            "lakelog_lake_tiered_records",
            "Records the accepted lake snapshots added to the lake (a re-sent snapshot adds none).",
            ["table"],
            registry=registry,
        )
        self._lake_last_commit = Gauge(
            "lakelog_lake_last_commit_timestamp_seconds",
            "When the coordinator last accepted a lake snapshot of the table (age: time() minus this).",
            ["table"],
            registry=registry,
        )

    def watch_fetch_limits(
        self, budget_in_use: Callable[[], float], budget_waiting: Callable[[], float], budget_connections: Callable[[], float], parked: Callable[[], float]
    ) -> None:
        """Gauges of the FetchLog answer budget and the parked long polls (read at scrape time)."""
        for name, text, read in (
            ("lakelog_fetch_budget_bytes_in_use", "FetchLog answer bytes in flight (server.fetch.max-inflight-bytes bounds them).", budget_in_use),
            ("lakelog_fetch_budget_waiters", "FetchLog calls waiting for answer budget.", budget_waiting),
            (
                "lakelog_fetch_budget_connections",
                "Client connections holding FetchLog answer budget (each an eighth of server.fetch.max-inflight-bytes at most).",
                budget_connections,
            ),
            ("lakelog_fetch_parked_polls", "Long polls parked waiting for data (server.fetch.max-parked-polls bounds them).", parked),
        ):
            Gauge(name, text, registry=self.registry).set_function(read)
        self._unparked_polls = Counter(
            "lakelog_fetch_unparked_polls",
            "Long polls answered at once because server.fetch.max-parked-polls polls were parked already.",
            registry=self.registry,
        )

    def count_unparked_poll(self) -> None:
        self._unparked_polls.inc()

    def watch_replica_stream(self, connections: Callable[[], int]) -> None:
        """The replica stream's numbers: its follower connections open, and the fetches it answered."""
        Gauge(
            "lakelog_replica_stream_connections", "Follower connections open to this server's replica stream.", registry=self.registry
        ).set_function(connections)
        self._stream_fetches = Counter(
            "lakelog_replica_stream_fetches", "Follower fetches this server answered over its replica stream.", registry=self.registry
        )

    def count_replica_stream_fetch(self) -> None:
        self._stream_fetches.inc()

    def observe_rpc(self, method: str, seconds: float) -> None:
        self._rpc_duration.labels(method).observe(seconds)

    def count_error(self, method: str, error: LakelogError, grpc_status: str = "OK") -> None:
        self._rpc_errors.labels(method, type(error).__name__, str(error.code), grpc_status).inc()

    def record_produce(self, table: str, records: int, size: int) -> None:
        self._produce_records.labels(table).inc(records)
        self._produce_bytes.labels(table).inc(size)

    def record_fetch(self, result: BucketFetchResult) -> None:
        """Count one FetchLog bucket answer by its tier, or as an error."""
        if result.error is not None:
            self.count_error("FetchLog", result.error)
            return
        if result.remote_log_fetch_info is not None:
            segments = result.remote_log_fetch_info.segments
            self._remote_answers.inc()
            self._remote_segments.inc(len(segments))
            self._remote_bytes.inc(sum(segment.size_in_bytes for segment in segments))
        elif result.lake_log_fetch_info is not None:
            self._lake_answers.inc()
        else:
            self._local_answers.inc()
            self._local_bytes.inc(len(result.records))

    def record_lake_commit(self, table: str, records: int) -> None:
        self._lake_commits.labels(table).inc()
        self._lake_tiered_records.labels(table).inc(records)
        self._lake_last_commit.labels(table).set_to_current_time()
