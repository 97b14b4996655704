"""The client reads remote log segments itself: real segment files, a real file:// directory and a
real (moto) S3 behind a proxy that can be cut. First the client's own downloader and reader over
segments a local log rolled, then end to end through a real tablet server that uploaded them.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

import lakelog
from lakelog.errors import CorruptRecordError, RemoteStorageError
from lakelog.record.batch import HEADER_SIZE, encode_batch, iter_headers
from lakelog.remote_fs import RemoteLocation, file_system
from lakelog.server.log.log_tablet import LogConfig, LogTablet
from lakelog.server.server_process import ServerProcess
from lakelog.client.scanner.log_fetcher import LogFetcher
from lakelog.client.table_bucket import TableBucket
from lakelog.client.scanner.remote_log_downloader import RemoteLogDownloader
from lakelog.fetch_info import RemoteLogFetchInfo, RemoteLogSegment
from lakelog.client.scanner.remote_log_reader import RemoteLogReader
from lakelog.client.scanner.read_ahead_budget import ReadAheadBudget
from lakelog.record.meta_columns import with_meta_fields
from tests.harness.s3 import MotoS3
from tests.harness.tables import ORDERS_SCHEMA, create_table, order_rows, scan_all

ROWS_PER_BATCH = 10
BATCHES = 40
PROJECTION = [2, 0]  # amount, id
PROJECTED = with_meta_fields(pa.schema([ORDERS_SCHEMA.field(i) for i in PROJECTION]))


@dataclass(frozen=True)
class Remote:
    """Segments uploaded in the agreed layout: ``<tablet_dir>/<segment_id>/<start:020d>.log``."""

    tablet_dir: str
    settings: dict[str, str]
    segments: list[RemoteLogSegment]
    files: dict[str, bytes]  # segment id -> the .log bytes

    def fs(self) -> pafs.FileSystem:
        return file_system(RemoteLocation.parse(self.tablet_dir), self.settings)

    def path(self, segment: RemoteLogSegment) -> str:
        return RemoteLocation.parse(self.tablet_dir).child(segment.file(".log")).path

    def fetch_info(self, offset: int) -> RemoteLogFetchInfo:
        """What a tablet server answers a fetch at ``offset`` with: the segment holding it and the rest."""
        index = next(i for i, s in enumerate(self.segments) if s.start_offset <= offset < s.end_offset)
        data = self.files[self.segments[index].segment_id]
        position = next(pos for pos, header in iter_headers(data) if header.next_offset > offset)
        return RemoteLogFetchInfo(self.tablet_dir, tuple(self.segments[index:]), position)

    def first_start_pos(self, offset: int) -> int:
        return self.fetch_info(offset).first_start_pos


def build_segments(directory: Path) -> list[Path]:
    """Rolled segments of a real local log, each a few batches of ORDERS rows."""
    tablet = LogTablet.open(directory, LogConfig(segment_max_bytes=4096), 0, "shop.orders bucket 0")
    for i in range(BATCHES):
        tablet.append(encode_batch(order_rows(i * ROWS_PER_BATCH, ROWS_PER_BATCH), schema_id=1))
    tablet.roll()
    tablet.close()
    return sorted(directory.glob("*.log"))[:-1]  # the last one is the empty active segment


def upload(tablet_dir: str, settings: dict[str, str], local: Path) -> Remote:
    segments, files = [], {}
    for path in build_segments(local):
        data = path.read_bytes()
        headers = [header for _, header in iter_headers(data)]
        segment = RemoteLogSegment(
            segment_id=f"seg-{path.stem}",
            start_offset=headers[0].base_offset,
            end_offset=headers[-1].next_offset,
            max_timestamp=headers[-1].commit_timestamp,
            size_in_bytes=len(data),
        )
        segments.append(segment)
        files[segment.segment_id] = data
    uploaded = Remote(tablet_dir, settings, segments, files)
    fs = uploaded.fs()
    for segment in segments:
        fs.create_dir(uploaded.path(segment).rsplit("/", 1)[0])
        with fs.open_output_stream(uploaded.path(segment)) as out:
            out.write(files[segment.segment_id])
    return uploaded


@pytest.fixture
def s3_remote(moto_s3: MotoS3, tmp_path: Path) -> Remote:
    settings = {"s3.endpoint": moto_s3.endpoint, "s3.region": "us-east-1"}
    return upload(f"s3://{moto_s3.create_bucket()}/log/shop/orders-1/0", settings, tmp_path / "local")


@pytest.fixture(params=["file", "s3"])
def remote(request: pytest.FixtureRequest, tmp_path: Path) -> Remote:
    if request.param == "s3":
        return request.getfixturevalue("s3_remote")
    return upload((tmp_path / "remote" / "orders-1" / "0").as_uri(), {}, tmp_path / "local")


@pytest.fixture
def downloader(remote: Remote) -> Iterator[RemoteLogDownloader]:
    loader = RemoteLogDownloader(remote.settings, prefetch_num=2, budget=ReadAheadBudget(1 << 20), max_get_bytes=1000)
    yield loader
    loader.close()


def reader_at(remote: Remote, downloader: RemoteLogDownloader, offset: int, projection: list[int] | None = PROJECTION) -> RemoteLogReader:
    schema = PROJECTED if projection else with_meta_fields(ORDERS_SCHEMA)
    return RemoteLogReader(remote.fetch_info(offset), offset, downloader, 0, schema, projection, "shop.orders bucket 0")


def read_tables(reader: RemoteLogReader, max_bytes: int = 1 << 20, timeout_s: float = 30) -> list[pa.Table]:
    """What each read of the reader gave, until it is done."""
    tables = []
    deadline = time.monotonic() + timeout_s
    while not reader.done:
        assert time.monotonic() < deadline, "the remote read made no progress"
        if not reader.ready():
            time.sleep(0.01)
            continue
        tables.append(reader.read(max_bytes))
    return tables


def read_all(reader: RemoteLogReader) -> pa.Table:
    return pa.concat_tables(read_tables(reader))


def expected(start: int, end: int) -> list[tuple[float, int, int]]:
    return [(i * 0.5, i, i) for i in range(start, end)]


def rows(table: pa.Table) -> list[tuple[float, int, int]]:
    return list(zip(table.column("amount").to_pylist(), table.column("id").to_pylist(), table.column("__offset").to_pylist()))


def test_segments_span_several_batches_and_files(remote: Remote) -> None:
    assert len(remote.segments) >= 5
    assert all(len(list(iter_headers(data))) >= 3 for data in remote.files.values())
    assert remote.segments[-1].end_offset == BATCHES * ROWS_PER_BATCH


def test_reads_exactly_from_a_mid_segment_offset_with_projection(remote: Remote, downloader: RemoteLogDownloader) -> None:
    first = remote.segments[1]
    offset = first.start_offset + ROWS_PER_BATCH + 3  # inside the second batch of the segment
    reader = reader_at(remote, downloader, offset)
    table = read_all(reader)
    assert table.schema == PROJECTED
    assert rows(table) == expected(offset, BATCHES * ROWS_PER_BATCH)
    assert set(table.column("__bucket").to_pylist()) == {0}
    assert reader.next_offset == remote.segments[-1].end_offset

    start_pos = remote.first_start_pos(offset)
    assert start_pos > 0
    read = downloader.bytes_read()
    assert read[first.segment_id] == first.size_in_bytes - start_pos  # not a byte before the batch
    assert remote.segments[0].segment_id not in read
    assert all(read[s.segment_id] == s.size_in_bytes for s in remote.segments[2:])


def test_each_read_is_bounded_and_continues_across_segment_ends(remote: Remote, downloader: RemoteLogDownloader) -> None:
    reader = reader_at(remote, downloader, 0, projection=None)
    batch_size = next(iter_headers(remote.files[remote.segments[0].segment_id]))[1].size
    tables = read_tables(reader, 2 * batch_size)
    assert max(t.num_rows for t in tables) <= 2 * ROWS_PER_BATCH
    table = pa.concat_tables(tables)
    assert table.column("__offset").to_pylist() == list(range(BATCHES * ROWS_PER_BATCH))
    assert table.select(["id", "name", "amount"]).to_pylist() == order_rows(0, BATCHES * ROWS_PER_BATCH).to_pylist()


def test_flipped_byte_raises_corrupt_record_naming_the_segment(remote: Remote, downloader: RemoteLogDownloader) -> None:
    victim = remote.segments[2]
    data = bytearray(remote.files[victim.segment_id])
    position, header = list(iter_headers(data))[1]
    data[position + HEADER_SIZE + 20] ^= 0xFF
    with remote.fs().open_output_stream(remote.path(victim)) as out:
        out.write(bytes(data))
    reader = reader_at(remote, downloader, remote.segments[1].start_offset)
    with pytest.raises(CorruptRecordError) as caught:
        read_all(reader)
    message = str(caught.value)
    assert victim.segment_id in message and remote.path(victim) in message and "shop.orders bucket 0" in message
    assert f"offset {header.base_offset}" in message and "CRC" in message
    reader.close()


def test_truncated_remote_segment_is_corruption_not_a_loop(remote: Remote, downloader: RemoteLogDownloader) -> None:
    victim = remote.segments[0]
    data = remote.files[victim.segment_id]
    last_position = list(iter_headers(data))[-1][0]
    with remote.fs().open_output_stream(remote.path(victim)) as out:
        out.write(data[:last_position])
    with pytest.raises(CorruptRecordError, match=f"{victim.segment_id}.*records end at offset"):
        read_all(reader_at(remote, downloader, 0))


def test_missing_remote_segment_is_a_retriable_remote_storage_error(remote: Remote, downloader: RemoteLogDownloader) -> None:
    remote.fs().delete_file(remote.path(remote.segments[0]))
    with pytest.raises(RemoteStorageError) as caught:
        read_all(reader_at(remote, downloader, 0))
    assert caught.value.retriable and remote.segments[0].segment_id in str(caught.value)


def test_the_rest_of_each_segment_is_read_in_one_get(remote: Remote) -> None:
    downloader = RemoteLogDownloader(remote.settings, prefetch_num=2, budget=ReadAheadBudget(1 << 20))
    offset = remote.segments[1].start_offset + ROWS_PER_BATCH + 3
    table = read_all(reader_at(remote, downloader, offset))
    downloader.close()
    assert table.column("__offset").to_pylist() == list(range(offset, BATCHES * ROWS_PER_BATCH))
    assert downloader.gets() == {segment.segment_id: 1 for segment in remote.segments[1:]}


def test_read_ahead_stays_within_the_scanner_budget_and_is_freed(remote: Remote) -> None:
    batch_size = next(iter_headers(remote.files[remote.segments[0].segment_id]))[1].size
    budget = ReadAheadBudget(3 * batch_size)
    downloader = RemoteLogDownloader(remote.settings, prefetch_num=4, budget=budget, max_get_bytes=batch_size + 100)
    reader = reader_at(remote, downloader, 0, projection=None)
    held = []
    tables = []
    deadline = time.monotonic() + 30
    while not reader.done:
        assert time.monotonic() < deadline, "the remote read made no progress"
        held.append(budget.held)
        if reader.ready():
            tables.append(reader.read(batch_size))
        else:
            time.sleep(0.01)
    assert max(held) <= budget.limit
    assert pa.concat_tables(tables).column("__offset").to_pylist() == list(range(BATCHES * ROWS_PER_BATCH))
    reader.close()
    assert budget.held == 0

    reader = reader_at(remote, downloader, 0)  # closed mid-read: what it held is freed too
    while not reader.ready():
        time.sleep(0.01)
    assert budget.held > 0
    reader.close()
    downloader.close()
    assert budget.held == 0


def test_s3_cut_mid_read_then_restore_continues_without_gap(s3_remote: Remote, s3_outage) -> None:
    downloader = RemoteLogDownloader(s3_remote.settings, prefetch_num=1, budget=ReadAheadBudget(1 << 20), max_get_bytes=1000)
    reader = reader_at(s3_remote, downloader, 0)
    tables = []
    deadline = time.monotonic() + 30
    while reader.next_offset < s3_remote.segments[0].end_offset:
        assert time.monotonic() < deadline
        if reader.ready():
            tables.append(reader.read(1))
        else:
            time.sleep(0.01)
    s3_outage.cut()  # the next segment is not requested yet: prefetch 1
    with pytest.raises(RemoteStorageError) as caught:
        read_all(reader)
    assert caught.value.retriable
    assert s3_remote.segments[1].segment_id in str(caught.value)
    position = reader.next_offset
    reader.close()
    s3_outage.restore()
    tables.append(read_all(reader_at(s3_remote, downloader, position)))
    downloader.close()
    assert pa.concat_tables(tables).column("__offset").to_pylist() == list(range(BATCHES * ROWS_PER_BATCH))


# -- end to end: a tablet server uploads, the client reads the remote tier itself -------------------

E2E_BATCHES = 120
E2E_ROWS_PER_BATCH = 100
E2E_TOTAL = E2E_BATCHES * E2E_ROWS_PER_BATCH


@dataclass
class Cluster:
    """A tablet server whose rolled segments are uploaded and trimmed locally, and the client's
    ``remote.fs.*`` settings for the same storage."""

    server: ServerProcess
    table: lakelog.Table
    client_conf: dict[str, str]

    @property
    def segments(self) -> list[RemoteLogSegment]:
        assert self.server.tablet is not None
        manifest = self.server.tablet.remote.manifest(self.table.info.table_id, 0)
        return list(manifest.segments)

    def log_file(self, segment: RemoteLogSegment) -> tuple[pafs.FileSystem, str]:
        assert self.server.tablet is not None
        tablet_dir = self.server.tablet.remote.storage.tablet_dir(self.table.path, self.table.info.table_id, 0)
        settings = {k.removeprefix("remote.fs."): v for k, v in self.client_conf.items()}
        return file_system(tablet_dir, settings), tablet_dir.child(segment.file(".log")).path

    def read_log(self, segment: RemoteLogSegment) -> bytes:
        fs, path = self.log_file(segment)
        with fs.open_input_stream(path) as stream:
            return stream.read()

    @contextmanager
    def scanner(self, columns: list[str] | None = None, config: dict[str, object] | None = None) -> Iterator[lakelog.LogScanner]:
        """A scanner on a connection of its own, with the remote settings plus ``config``."""
        with lakelog.connect(self.server.address, {**self.client_conf, **(config or {})}) as conn:
            scan = conn.get_table(self.table.path).new_scan()
            with (scan.project(columns) if columns else scan).create_log_scanner() as scanner:
                yield scanner


def start_cluster(server_factory: Callable[..., ServerProcess], remote_conf: dict[str, str]) -> Cluster:
    """A server with 64 KiB segments, ~360 KiB produced, then one remote log pass: uploads and
    local trimming, so the bucket starts in remote segments and ends in local ones."""
    server = server_factory(**{"log.segment.max-bytes": "64kb", "remote.log.task-interval": "1h", **remote_conf})
    client_conf = {k: v for k, v in remote_conf.items() if k.startswith("remote.fs.")}
    with lakelog.connect(server.address, client_conf) as conn:
        table = create_table(conn)
        writer = table.new_append().create_writer()
        for i in range(E2E_BATCHES):
            writer.append_arrow(order_rows(i * E2E_ROWS_PER_BATCH, E2E_ROWS_PER_BATCH))
            writer.flush()
        writer.close()
    assert server.tablet is not None
    report = server.tablet.remote.run_once()
    assert not report.errors and report.uploaded >= 4 and report.deleted_local >= 2
    return Cluster(server, table, client_conf)


@pytest.fixture
def s3_cluster(moto_s3: MotoS3, server_factory: Callable[..., ServerProcess]) -> Cluster:
    return start_cluster(server_factory, {"remote.data.dir": f"s3://{moto_s3.create_bucket()}/lakelog", **moto_s3.settings()})


@pytest.fixture(params=["file", "s3"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path, server_factory: Callable[..., ServerProcess]) -> Cluster:
    if request.param == "s3":
        return request.getfixturevalue("s3_cluster")
    return start_cluster(server_factory, {"remote.data.dir": (tmp_path / "remote").as_uri()})


def test_e2e_from_beginning_reads_remote_then_local_with_projection(cluster: Cluster) -> None:
    segments = cluster.segments
    with cluster.scanner(["amount", "id"]) as scanner:
        scanner.subscribe_from_beginning()
        table = scan_all(scanner, E2E_TOTAL)
        assert scanner.poll_arrow(timeout_ms=200).num_rows == 0
        stats = scanner.remote_read_stats()
    assert segments[0].start_offset == 0 and segments[-1].end_offset < E2E_TOTAL  # remote, then local
    assert table.column_names == ["amount", "id", "__bucket", "__offset", "__timestamp"]
    assert rows(table) == expected(0, E2E_TOTAL)
    assert stats == {s.segment_id: s.size_in_bytes for s in segments}


def test_e2e_a_scanner_budget_smaller_than_a_segment_still_reads_every_record_once(cluster: Cluster) -> None:
    """``client.scanner.max-buffered-bytes`` far below one segment: remote segments come in several
    GETs, fetch answers wait for polls to free the budget, and the log still arrives whole, in order."""
    segments = cluster.segments
    with cluster.scanner(["amount", "id"], {"client.scanner.max-buffered-bytes": "16kb"}) as scanner:
        scanner.subscribe_from_beginning()
        table = scan_all(scanner, E2E_TOTAL)
        stats = scanner.remote_read_stats()
    assert rows(table) == expected(0, E2E_TOTAL)
    assert stats == {s.segment_id: s.size_in_bytes for s in segments}


def test_e2e_a_fetch_completing_while_a_poll_starts_a_remote_read_is_no_second_read(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another fetch completes (and sends again) just as a poll acts on a bucket's remote answer,
    before its reader is started: the bucket is not fetched again in that window. Otherwise that
    fetch comes back with the same remote pointer and starts a second reader over the first, whose
    downloads then hold the scanner's budget for good: a large scan stops dead. Here the segments
    would be read twice."""
    start_reader = LogFetcher.start_reader

    def racing(fetcher: LogFetcher, bucket: TableBucket, reader: object) -> None:
        fetcher.send_fetches()  # what a fetch completing on a gRPC thread does in this window
        deadline = time.monotonic() + 5
        while fetcher._buffer.in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        start_reader(fetcher, bucket, reader)

    monkeypatch.setattr(LogFetcher, "start_reader", racing)
    with cluster.scanner(["amount", "id"]) as scanner:
        scanner.subscribe_from_beginning()
        table = scan_all(scanner, E2E_TOTAL)
        assert scanner.poll_arrow(timeout_ms=200).num_rows == 0
        stats = scanner.remote_read_stats()
    assert rows(table) == expected(0, E2E_TOTAL)
    assert stats == {s.segment_id: s.size_in_bytes for s in cluster.segments}


def test_e2e_subscribe_mid_remote_segment_reads_nothing_before_its_batch(cluster: Cluster) -> None:
    segments = cluster.segments
    target = segments[1]
    offset = target.start_offset + 2 * E2E_ROWS_PER_BATCH + 17
    start_pos = next(pos for pos, h in iter_headers(cluster.read_log(target)) if h.next_offset > offset)
    assert start_pos > 0
    with cluster.scanner(["amount", "id"]) as scanner:
        scanner.subscribe(0, offset)
        table = scan_all(scanner, E2E_TOTAL - offset)
        stats = scanner.remote_read_stats()
    assert rows(table) == expected(offset, E2E_TOTAL)
    assert stats[target.segment_id] == target.size_in_bytes - start_pos
    assert segments[0].segment_id not in stats


def test_e2e_s3_cut_while_reading_remote_then_restore_continues(s3_cluster: Cluster, s3_outage) -> None:
    # One segment downloaded at a time, a few batches per poll: the cut lands mid-way through the remote tier.
    config = {"client.scanner.remote-log.prefetch-num": 1, "client.scanner.fetch.max-bytes-per-bucket": "8kb"}
    tables = []
    with s3_cluster.scanner(config=config) as scanner:
        scanner.subscribe_from_beginning()
        tables.append(scan_all(scanner, 1))
        s3_outage.cut()
        deadline = time.monotonic() + 60
        with pytest.raises(RemoteStorageError) as caught:
            while time.monotonic() < deadline:
                tables.append(scanner.poll_arrow(timeout_ms=500))
        returned = sum(table.num_rows for table in tables)
        assert caught.value.retriable and returned < s3_cluster.segments[-1].end_offset
        assert any(segment.segment_id in str(caught.value) for segment in s3_cluster.segments)
        assert scanner.positions() == {0: returned}
        s3_outage.restore()
        tables.append(scan_all(scanner, E2E_TOTAL - returned))
    assert pa.concat_tables(tables).column("__offset").to_pylist() == list(range(E2E_TOTAL))


def test_e2e_corrupted_remote_segment_names_the_segment(cluster: Cluster) -> None:
    victim = cluster.segments[1]
    data = bytearray(cluster.read_log(victim))
    position, header = list(iter_headers(data))[3]
    data[position + HEADER_SIZE + 50] ^= 0xFF
    fs, path = cluster.log_file(victim)
    with fs.open_output_stream(path) as out:
        out.write(bytes(data))
    tables = []
    with cluster.scanner() as scanner:
        scanner.subscribe_from_beginning()
        deadline = time.monotonic() + 30
        with pytest.raises(CorruptRecordError) as caught:
            while time.monotonic() < deadline:
                tables.append(scanner.poll_arrow(timeout_ms=500))
        assert scanner.positions() == {0: header.base_offset}
    assert victim.segment_id in str(caught.value) and path in str(caught.value)
    assert f"offset {header.base_offset}" in str(caught.value)
    assert pa.concat_tables(tables).column("__offset").to_pylist() == list(range(header.base_offset))
