"""The Prometheus endpoint: scraped over real HTTP from a real server, its counters move with
produce, with fetches served from each tier (local, remote, lake), with tiering, with RPCs and their
errors; its gauges describe the tiers as the server itself describes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import grpc
import pytest

import lakelog
from lakelog.errors import StaleLakeSnapshotError, TableNotExistError
from lakelog.metadata import LakeBucketOffset, LakeSnapshot
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceStub
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.harness.lake_tier import LAKE_TABLE, TIERED_TABLE, expire_remote
from tests.harness.metrics_scrape import Scrape
from tests.harness.tables import create_table, produce_orders, scan_all

BUCKETS = 2
RECORDS = 24_000
TABLE = "shop.orders"


def _scan_everything(server: ServerProcess, path: lakelog.TablePath, **config: Any) -> None:
    with lakelog.connect(server.address, config) as conn:
        with conn.get_table(path).new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            assert scan_all(scanner, RECORDS).num_rows == RECORDS


def _fetch_delta(before: Scrape, after: Scrape, name: str, tier: str) -> float:
    return after(name, tier=tier) - before(name, tier=tier)


def test_counters_and_gauges_follow_data_through_every_tier(
    tiered_server: ServerProcess, spark: Any
) -> None:
    server = tiered_server
    assert server.tablet is not None
    remote = server.tablet.remote
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, buckets=BUCKETS, properties=TIERED_TABLE)

        # Produce: records and bytes counted, all of it local, none uploaded, none in the lake.
        produce_orders(table, 0, RECORDS)
        produced = Scrape(server)
        assert produced("lakelog_produce_records_total", table=TABLE) == RECORDS
        produced_bytes = produced("lakelog_produce_bytes_total", table=TABLE)
        assert produced_bytes == produced("lakelog_segments_size_bytes", table=TABLE, tier="local") > 0
        assert produced("lakelog_segments", table=TABLE, tier="local") > BUCKETS
        assert produced("lakelog_segments", table=TABLE, tier="remote") == 0
        assert produced("lakelog_remote_upload_lag_records", table=TABLE) == RECORDS
        assert produced("lakelog_lake_lag_records", table=TABLE) == RECORDS

        # Fetch from local: every batch sent once at least, no other tier touched.
        _scan_everything(server, table.path, **{"client.lake.enabled": "false"})
        local = Scrape(server)
        assert _fetch_delta(produced, local, "lakelog_fetch_answers_total", "local") >= BUCKETS
        assert _fetch_delta(produced, local, "lakelog_fetch_bytes_total", "local") >= produced_bytes
        assert local("lakelog_fetch_answers_total", tier="remote") == local("lakelog_fetch_answers_total", tier="lake") == 0
        fetches = local("lakelog_rpc_duration_seconds_count", method="FetchLog")
        assert fetches > produced("lakelog_rpc_duration_seconds_count", method="FetchLog")

        # Upload: rolled segments go remote, one local segment (the active one) stays per bucket.
        assert remote.run_once().uploaded > 0
        uploaded = Scrape(server)
        described = conn.admin.describe_buckets(table.path)
        assert uploaded("lakelog_segments", table=TABLE, tier="local") == BUCKETS
        assert uploaded("lakelog_segments", table=TABLE, tier="remote") > 0
        remote_bytes = uploaded("lakelog_segments_size_bytes", table=TABLE, tier="remote")
        assert remote_bytes > 0
        assert uploaded("lakelog_remote_upload_lag_records", table=TABLE) == sum(
            info.high_watermark - info.remote_log_end_offset for info in described.values()
        )

        # Fetch from remote: every remote segment handed out, its bytes counted.
        _scan_everything(server, table.path, **{"client.lake.enabled": "false"})
        from_remote = Scrape(server)
        assert _fetch_delta(uploaded, from_remote, "lakelog_fetch_answers_total", "remote") >= BUCKETS
        assert _fetch_delta(uploaded, from_remote, "lakelog_fetch_bytes_total", "remote") >= remote_bytes
        handed_out = from_remote("lakelog_fetch_remote_segments_total") - uploaded("lakelog_fetch_remote_segments_total")
        assert handed_out >= uploaded("lakelog_segments", table=TABLE, tier="remote")
        assert from_remote("lakelog_rpc_duration_seconds_count", method="FetchLog") > fetches

        # Tiering: one lake commit holding every record; the lake lag drops to zero.
        with TieringJob(TieringOptions(server.address, tables=(table.path,)), spark=spark) as job:
            assert job.run_round().records == RECORDS
        tiered = Scrape(server)
        assert tiered("lakelog_lake_commits_total", table=TABLE) == 1
        assert tiered("lakelog_lake_tiered_records_total", table=TABLE) == RECORDS
        assert tiered("lakelog_lake_lag_records", table=TABLE) == 0
        assert tiered("lakelog_lake_last_commit_timestamp_seconds", table=TABLE) > 0
        assert tiered("lakelog_rpc_duration_seconds_count", method="CommitLakeTableSnapshot") == 1

        # Remote TTL expires what the lake holds: the oldest offsets are served from the lake.
        assert expire_remote(remote).expired > 0
        expired = Scrape(server)
        assert expired("lakelog_segments", table=TABLE, tier="remote") < tiered("lakelog_segments", table=TABLE, tier="remote")
        _scan_everything(server, table.path, **{"client.lake.source": "iceberg-arrow"})
        from_lake = Scrape(server)
        assert _fetch_delta(expired, from_lake, "lakelog_fetch_answers_total", "lake") >= BUCKETS


def test_rpc_errors_counted_by_method_error_and_status(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory(**{"metrics.port": 0})
    bucket = pb.PbFetchLogReqForBucket(bucket_id=0, fetch_offset=0, max_fetch_bytes=1024)
    with grpc.insecure_channel(server.address) as channel:
        stub = TabletServiceStub(channel)
        # An unknown table: the call succeeds, its bucket answer carries the error.
        unknown = pb.FetchLogRequest(max_bytes=1024, tables_req=[pb.PbFetchLogReqForTable(table_id=999, buckets_req=[bucket])])
        answer = stub.FetchLog(unknown).tables_resp[0].buckets_resp[0]
        assert answer.error_code == TableNotExistError.code
        # A request no fetch can take: the call itself fails.
        bad = pb.FetchLogRequest(max_bytes=0, tables_req=[pb.PbFetchLogReqForTable(table_id=999, buckets_req=[bucket])])
        with pytest.raises(grpc.RpcError) as failed:
            stub.FetchLog(bad)
        assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    scrape = Scrape(server)
    errors = "lakelog_rpc_errors_total"
    assert scrape(errors, method="FetchLog", error="TableNotExistError", code="14", grpc_status="OK") == 1
    assert scrape(errors, method="FetchLog", error="InvalidRequestError", code="4", grpc_status="INVALID_ARGUMENT") == 1
    assert scrape("lakelog_rpc_duration_seconds_count", method="FetchLog") == 2


def test_lake_commits_count_records_added_once(server_factory: Callable[..., ServerProcess]) -> None:
    """A re-sent snapshot counts as a commit but adds no records; a stale one is an error."""
    server = server_factory(**{"metrics.port": 0})
    path = lakelog.TablePath("shop", "orders")
    with lakelog.connect(server.address) as conn:
        create_table(conn, buckets=2, properties=LAKE_TABLE)
        first = LakeSnapshot(1, {0: LakeBucketOffset(0, 100, 1), 1: LakeBucketOffset(0, 50, 1)})
        conn.internal_admin.commit_lake_snapshot(path, first)
        conn.internal_admin.commit_lake_snapshot(path, first)
        conn.internal_admin.commit_lake_snapshot(path, LakeSnapshot(2, {0: LakeBucketOffset(0, 130, 2)}))
        with pytest.raises(StaleLakeSnapshotError):
            conn.internal_admin.commit_lake_snapshot(path, LakeSnapshot(3, {1: LakeBucketOffset(0, 10, 3)}))
    scrape = Scrape(server)
    assert scrape("lakelog_lake_commits_total", table=TABLE) == 3
    assert scrape("lakelog_lake_tiered_records_total", table=TABLE) == 180
    stale = {"method": "CommitLakeTableSnapshot", "error": "StaleLakeSnapshotError", "code": "28", "grpc_status": "OK"}
    assert scrape("lakelog_rpc_errors_total", **stale) == 1


def test_metrics_off_by_default_and_counted_per_server(server_factory: Callable[..., ServerProcess], tmp_path: Path) -> None:
    """Each server counts in its own registry: two in one process do not mix their counts."""
    quiet = server_factory(tmp_path / "quiet")
    assert quiet.metrics_port == -1
    first = server_factory(tmp_path / "first", **{"metrics.port": 0})
    second = server_factory(tmp_path / "second", **{"metrics.port": 0})
    assert first.metrics_port != second.metrics_port
    with lakelog.connect(first.address) as conn:
        produce_orders(create_table(conn), 0, 10)
    assert Scrape(first)("lakelog_produce_records_total", table=TABLE) == 10
    assert Scrape(second)("lakelog_produce_records_total", table=TABLE) == 0


def listening_addresses(port: int) -> set[str]:
    """The local IPv4 addresses the kernel has a socket listening on ``port`` at (/proc/net/tcp)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
            found.add(".".join(str(b) for b in reversed(bytes.fromhex(address))))
    return found


def test_metrics_listen_on_loopback_even_when_the_server_listens_everywhere(server_factory) -> None:
    """The endpoint has no TLS or token and names tables: exposing it takes an explicit metrics.host."""
    server = server_factory(**{"metrics.port": 0, "server.host": "0.0.0.0"})
    assert listening_addresses(server.metrics_port) == {"127.0.0.1"}
    exposed = server_factory(data_dir=server.data_dir.parent / "exposed", **{"metrics.port": 0, "metrics.host": "0.0.0.0"})
    assert listening_addresses(exposed.metrics_port) == {"0.0.0.0"}
