"""A restarted tablet server answers fetches and offset lookups only once the coordinator has told
it its buckets and lake offsets (docs/contract.md, "Tiers"): until then UNAVAILABLE (ServerNotReadyError, retriable),
never an "out of range" for an offset the lake holds."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc

import lakelog
from lakelog.metadata import LakeBucketOffset, LakeSnapshot
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceStub
from lakelog.server.server_process import ServerProcess
from tests.harness.lake_tier import LAKE_TABLE
from tests.harness.s3 import free_port
from tests.harness.tables import create_table

SECRET = {"cluster.secret": "readiness"}


def coordinator(tmp_path: Path, port: int) -> ServerProcess:
    return ServerProcess({"data.dir": str(tmp_path / "c"), "server.port": port, **SECRET}, ("coordinator",))


def tablet(tmp_path: Path, coordinator_port: int) -> ServerProcess:
    conf = {"data.dir": str(tmp_path / "t"), "server.port": 0, "coordinator.address": f"127.0.0.1:{coordinator_port}",
            "tablet-server.id": 1, **SECRET}
    return ServerProcess(conf, ("tablet-server",))


def lake_lookup(address: str, table_id: int) -> pb.PbListOffsetsRespForBucket:
    """The first offset at timestamp 500 with the lake enabled: the lake (max timestamp 1000)
    answers with its snapshot id, when the server knows the lake offsets."""
    request = pb.ListOffsetsRequest(table_id=table_id, bucket_id=[0], offset_type=2, start_timestamp=500, enable_lake=True)
    with grpc.insecure_channel(address) as channel:
        return TabletServiceStub(channel).ListOffsets(request, timeout=10).buckets_resp[0]


def fetch(address: str, table_id: int) -> pb.FetchLogResponse:
    request = pb.FetchLogRequest(
        max_bytes=1 << 20, enable_lake=True,
        tables_req=[pb.PbFetchLogReqForTable(table_id=table_id, buckets_req=[pb.PbFetchLogReqForBucket(fetch_offset=0, max_fetch_bytes=1 << 20)])],
    )
    with grpc.insecure_channel(address) as channel:
        return TabletServiceStub(channel).FetchLog(request, timeout=10)


def test_a_restarted_tablet_server_is_unavailable_until_it_has_its_lake_offsets(tmp_path: Path) -> None:
    port = free_port()
    first_coordinator, first_tablet = coordinator(tmp_path, port).start(), None
    try:
        first_tablet = tablet(tmp_path, port).start()
        with lakelog.connect(first_coordinator.address) as conn:
            table = create_table(conn, properties=LAKE_TABLE)
            conn.internal_admin.commit_lake_snapshot(table.path, LakeSnapshot(7, {0: LakeBucketOffset(0, 30, 1_000)}))
        assert lake_lookup(first_tablet.address, table.info.table_id).lake_snapshot_id == 7
    finally:
        for process in (first_tablet, first_coordinator):
            if process is not None:
                process.stop(0)

    restarted = tablet(tmp_path, port)  # its coordinator is down: it serves but cannot register yet
    joined = threading.Thread(target=restarted.start, name="tablet start")
    joined.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, "the restarted tablet server never answered"
            try:
                if restarted.port:
                    fetch(restarted.address, table.info.table_id)
            except grpc.RpcError as error:
                if "is starting" in (error.details() or ""):
                    assert error.code() == grpc.StatusCode.UNAVAILABLE
                    break
            time.sleep(0.05)
        try:
            lake_lookup(restarted.address, table.info.table_id)
            raise AssertionError("ListOffsets answered before the lake offsets were restored")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.UNAVAILABLE and "has not learned its buckets and lake offsets" in error.details()

        second_coordinator = coordinator(tmp_path, port).start()
        joined.join(60)
        assert not joined.is_alive()
        assert lake_lookup(restarted.address, table.info.table_id).lake_snapshot_id == 7
        second_coordinator.stop(0)
    finally:
        joined.join(60)
        restarted.stop(0)
