"""The remote tier in tests: where a server keeps remote segments and how a test reads them back,
a produce of many small batches, and the server's own remote log task and local logs."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pyarrow.fs as pafs
import pytest

import lakelog
from lakelog.record.batch import iter_headers
from lakelog.remote_fs import RemoteLocation, file_system
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceStub
from lakelog.server.log.log_tablet import LogTablet
from lakelog.server.server_process import ServerProcess
from tests.harness.s3 import MotoS3
from tests.harness.tables import order_rows

BATCHES = 120
ROWS_PER_BATCH = 100
BASE_CONF = {"log.segment.max-bytes": "64kb", "remote.log.task-interval": "1h"}


@dataclass
class Remote:
    """Where a test's tablet server keeps remote segments, and how the test reads them back."""

    conf: dict[str, str]

    @property
    def root(self) -> RemoteLocation:
        return RemoteLocation.parse(self.conf["remote.data.dir"])

    def fs(self) -> pafs.FileSystem:
        return file_system(self.root, {k.removeprefix("remote.fs."): v for k, v in self.conf.items() if k.startswith("remote.fs.")})

    def tablet_dir(self, table: lakelog.Table, bucket: int = 0) -> RemoteLocation:
        return self.root.child("log", table.path.database, f"{table.path.table}-{table.info.table_id}", str(bucket))

    def read(self, location: RemoteLocation) -> bytes:
        with self.fs().open_input_stream(location.path) as stream:
            return stream.read()

    def manifest(self, table: lakelog.Table) -> list[dict[str, Any]]:
        return json.loads(self.read(self.tablet_dir(table).child("manifest.json")))["segments"]

    def names(self, table: lakelog.Table) -> set[str]:
        selector = pafs.FileSelector(self.tablet_dir(table).path, allow_not_found=True)
        return {info.base_name for info in self.fs().get_file_info(selector)}

    def segment_file(self, table: lakelog.Table, segment: dict[str, Any], suffix: str) -> RemoteLocation:
        return self.tablet_dir(table).child(segment["segment_id"], f"{segment['start_offset']:020d}{suffix}")


@pytest.fixture(params=["file", "s3"])
def remote(request: pytest.FixtureRequest, tmp_path: Path) -> Remote:
    if request.param == "file":
        return Remote({**BASE_CONF, "remote.data.dir": (tmp_path / "remote").as_uri()})
    moto_s3: MotoS3 = request.getfixturevalue("moto_s3")
    return Remote({**BASE_CONF, "remote.data.dir": f"s3://{moto_s3.create_bucket()}/lakelog", **moto_s3.settings()})


def produce(table: lakelog.Table, batches: int = BATCHES, first_id: int = 0) -> None:
    """One batch per produce request, a few ms apart, so batches have distinct commit timestamps."""
    writer = table.new_append().create_writer()
    for i in range(batches):
        writer.append_arrow(order_rows(first_id + i * ROWS_PER_BATCH, ROWS_PER_BATCH))
        writer.flush()
        time.sleep(0.002)
    writer.close()


def local_log(server: ServerProcess, table: lakelog.Table, bucket: int = 0) -> LogTablet:
    assert server.tablet is not None
    tablet = server.tablet.logs.get(table.info.table_id, bucket)
    assert tablet is not None
    return tablet


def remote_manager(server: ServerProcess) -> Any:
    assert server.tablet is not None
    return server.tablet.remote


def fetch(server: ServerProcess, table: lakelog.Table, offset: int, bucket: int = 0) -> pb.PbFetchLogRespForBucket:
    request = pb.FetchLogRequest(
        follower_server_id=-1,
        max_bytes=1 << 20,
        max_wait_ms=0,
        min_bytes=1,
        tables_req=[
            pb.PbFetchLogReqForTable(
                table_id=table.info.table_id,
                buckets_req=[pb.PbFetchLogReqForBucket(bucket_id=bucket, fetch_offset=offset, max_fetch_bytes=1 << 20)],
            )
        ],
    )
    with grpc.insecure_channel(server.address) as channel:
        response = TabletServiceStub(channel).FetchLog(request, timeout=30)
    return response.tables_resp[0].buckets_resp[0]


def all_batches(remote: Remote, table: lakelog.Table, tablet: LogTablet) -> list[tuple[int, int]]:
    """(base offset, commit timestamp) of every batch, from the remote .log files and the local ones."""
    found = {}
    for segment in remote.manifest(table):
        for _, header in iter_headers(remote.read(remote.segment_file(table, segment, ".log"))):
            found[header.base_offset] = header.commit_timestamp
    for segment in tablet.segments:
        for _, header in iter_headers(segment.path.read_bytes()):
            found[header.base_offset] = header.commit_timestamp
    return sorted(found.items())
