"""The tier rule of docs/contract.md, "Tiers" on the server: lake answers only for requests that set
``enable_lake``, the lake end is exclusive, and an old client sees exactly the old behaviour.

The lake range is set with a real NotifyLakeTableOffset call (what the coordinator sends after a
tiering commit); the records below the remote start are then really gone from remote and local.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

import lakelog
from lakelog.record.batch import read_header
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceStub
from tests.harness.lake_tier import expire_remote
from tests.harness.membership import member_metadata
from tests.harness.remote_tier import BASE_CONF, Remote, all_batches, local_log, produce, remote_manager
from tests.harness.tables import create_table

SNAPSHOT = 4242


def call(server, method: str, request):  # noqa: ANN001, ANN201 - raw protobuf in, raw protobuf out
    with grpc.insecure_channel(server.address) as channel:
        return getattr(TabletServiceStub(channel), method)(request, timeout=30, metadata=member_metadata(server))


def fetch(server, table: lakelog.Table, offset: int, enable_lake: bool) -> pb.PbFetchLogRespForBucket:
    request = pb.FetchLogRequest(
        max_bytes=1 << 20,
        enable_lake=enable_lake,
        tables_req=[
            pb.PbFetchLogReqForTable(
                table_id=table.info.table_id,
                buckets_req=[pb.PbFetchLogReqForBucket(bucket_id=0, fetch_offset=offset, max_fetch_bytes=1 << 20)],
            )
        ],
    )
    return call(server, "FetchLog", request).tables_resp[0].buckets_resp[0]


def list_offset(server, table: lakelog.Table, offset_type: int, enable_lake: bool, ms: int = 0) -> pb.PbListOffsetsRespForBucket:
    request = pb.ListOffsetsRequest(
        offset_type=offset_type, table_id=table.info.table_id, bucket_id=[0], start_timestamp=ms, enable_lake=enable_lake
    )
    return call(server, "ListOffsets", request).buckets_resp[0]


@pytest.fixture
def lake_only_prefix(server_factory, tmp_path: Path):
    """A lake-enabled table whose offsets [0, lake_end) were tiered and then expired from remote.
    Also yields the remote storage and (base offset, commit timestamp) of every batch, taken before the expiry."""
    remote = Remote({**BASE_CONF, "remote.data.dir": (tmp_path / "remote").as_uri()})
    server = server_factory(**remote.conf)
    conn = lakelog.connect(server.address)
    table = create_table(conn, properties={"table.datalake.enabled": "true", "table.log.ttl": "1s"})
    produce(table, 80)
    manager = remote_manager(server)
    manager.run_once()
    segments = manager.manifest(table.info.table_id, 0).segments
    lake_end = segments[2].end_offset
    max_ts = segments[2].max_timestamp
    call(
        server,
        "NotifyLakeTableOffset",
        pb.NotifyLakeTableOffsetRequest(
            notify_buckets_req=[
                pb.PbNotifyLakeTableOffsetReqForBucket(
                    table_id=table.info.table_id,
                    bucket_id=0,
                    snapshot_id=SNAPSHOT,
                    log_start_offset=0,
                    log_end_offset=lake_end,
                    log_max_timestamp=max_ts,
                )
            ]
        ),
    )
    batches = all_batches(remote, table, local_log(server, table))
    assert expire_remote(manager, days=2).expired == 3, "the TTL deletes exactly what the lake covers"
    yield server, conn, table, lake_end, max_ts, remote, batches
    conn.close()


def test_fetch_in_the_lake_only_with_enable_lake(lake_only_prefix) -> None:
    server, conn, table, lake_end, _, remote, _ = lake_only_prefix
    for offset in (0, lake_end // 2, lake_end - 1):
        answer = fetch(server, table, offset, enable_lake=True)
        assert answer.error_code == 0 and not answer.records
        assert (answer.lake_log_fetch_info.snapshot_id, answer.lake_log_fetch_info.log_end_offset) == (SNAPSHOT, lake_end)
        assert answer.log_start_offset == 0
        old = fetch(server, table, offset, enable_lake=False)
        assert old.error_code == lakelog.OffsetOutOfRangeError.code
        assert old.log_start_offset == lake_end and not old.HasField("lake_log_fetch_info")
        assert f"offset {offset} of bucket 0" in old.error_message
    at_end = fetch(server, table, lake_end, enable_lake=True)
    assert not at_end.HasField("lake_log_fetch_info"), "the lake end is exclusive"
    assert at_end.error_code == 0
    if at_end.records:
        assert read_header(at_end.records, 0).base_offset == lake_end, "local records start exactly at the lake end"
    else:
        info = at_end.remote_log_fetch_info
        segment = info.remote_log_segments[0]
        assert segment.remote_log_start_offset <= lake_end < segment.remote_log_end_offset
        log_file = remote.tablet_dir(table).child(segment.remote_log_segment_id, f"{segment.remote_log_start_offset:020d}.log")
        header = read_header(remote.read(log_file), info.first_start_pos)
        assert header.base_offset == lake_end, "the remote read starts at the batch of the lake end"


def test_list_offsets_with_and_without_the_lake(lake_only_prefix) -> None:
    server, conn, table, lake_end, max_ts, _, batches = lake_only_prefix
    assert list_offset(server, table, pb.EARLIEST, enable_lake=True).offset == 0
    assert list_offset(server, table, pb.EARLIEST, enable_lake=False).offset == lake_end
    lake = list_offset(server, table, pb.TIMESTAMP, enable_lake=True, ms=max_ts)
    assert lake.lake_snapshot_id == SNAPSHOT
    later = list_offset(server, table, pb.TIMESTAMP, enable_lake=True, ms=max_ts + 1)
    first_after = next(offset for offset, ts in batches if ts >= max_ts + 1)
    assert first_after == lake_end, "the lake's last batch is the only one at max_ts"
    assert later.lake_snapshot_id == -1 and later.offset == first_after
    old = list_offset(server, table, pb.TIMESTAMP, enable_lake=False, ms=0)
    assert old.lake_snapshot_id == -1 and old.offset == lake_end
    described = conn.admin.describe_buckets(table.path)[0]
    assert (described.lake_log_start_offset, described.lake_log_end_offset) == (0, lake_end)
    starts = [o for o in (described.remote_log_start_offset, described.local_log_start_offset) if o >= 0]
    assert min(starts) == lake_end, "the server's own tiers start where the lake ends"


def test_old_client_gets_offset_out_of_range_for_lake_only_offsets(lake_only_prefix) -> None:
    server, _, table, lake_end, _, _, _ = lake_only_prefix
    with lakelog.connect(server.address, {"client.lake.enabled": "false"}) as old:
        scanner = old.get_table(table.path).new_scan().create_log_scanner()
        scanner.subscribe(0, 0)
        with pytest.raises(lakelog.OffsetOutOfRangeError) as info:
            for _ in range(10):
                scanner.poll(timeout_ms=500)
    assert (info.value.offset, info.value.earliest) == (0, lake_end)
