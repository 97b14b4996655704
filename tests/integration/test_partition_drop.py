"""Dropping a lake-enabled table's partition on a real server: writes racing the drop are fenced,
and the lake-only partition it leaves answers offsets and descriptions from the lake. The lake
snapshot is committed to the coordinator directly (no tiering job): only its offsets matter here
(test_partition_lake.py reads a lake-only partition's records and timestamps from a real lake)."""

from __future__ import annotations

import threading
from typing import Callable, Iterator

import pyarrow as pa
import pytest

import lakelog
from lakelog.metadata import BucketInfo, LakeBucketOffset, LakeSnapshot
from lakelog.server.server_process import ServerProcess

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64())])
PATH = lakelog.TablePath("shop", "visits")
BUCKETS = 2


def _rows(day: str, start: int, count: int) -> pa.Table:
    return pa.table({"dt": [day] * count, "id": list(range(start, start + count))}, schema=SCHEMA)


def _write(conn: lakelog.Connection, rows: pa.Table, bucket: int) -> list[lakelog.AppendAck]:
    acks: list[lakelog.AppendAck] = []
    with conn.get_table(PATH).new_append().create_writer(on_ack=acks.append) as writer:
        writer.append_arrow(rows, bucket=bucket)
    return acks


def _lake_holds_everything(server: ServerProcess, conn: lakelog.Connection, day: str) -> int:
    """Commit a lake snapshot holding the partition's whole log, as a tiering round would; its id."""
    assert server.coordinator is not None
    info = conn.admin.get_table_info(PATH)
    (partition,) = [p for p in conn.admin.list_partition_infos(PATH) if p.partition_name == day]
    ends = conn.admin.list_offsets(PATH, partition_name=day)
    offsets = {(partition.partition_id, b): LakeBucketOffset(0, end) for b, end in ends.items()}
    server.coordinator.coordinator.commit_lake_snapshot(info.table_id, LakeSnapshot(1, offsets))
    return partition.partition_id


def _signal_after_describe(server: ServerProcess, monkeypatch: pytest.MonkeyPatch, described: threading.Event) -> None:
    """Set ``described`` each time the coordinator has read the partition's high watermarks."""
    assert server.coordinator is not None
    notifier = server.coordinator.coordinator._notifier
    describe = notifier.describe_buckets

    def describe_then_signal(*args, **kwargs):
        answer = describe(*args, **kwargs)
        described.set()
        return answer

    monkeypatch.setattr(notifier, "describe_buckets", describe_then_signal)


@pytest.fixture
def lake_table(server_factory: Callable[..., ServerProcess]) -> Iterator[tuple[ServerProcess, lakelog.Connection]]:
    server = server_factory()
    conn = lakelog.connect(server.address)
    conn.admin.create_database("shop", ignore_if_exists=True)
    conn.admin.create_table(PATH, lakelog.TableDescriptor(SCHEMA, BUCKETS, {"table.datalake.enabled": "true"}, partition_keys=["dt"]))
    yield server, conn
    conn.close()


def test_a_write_racing_the_drop_check_is_refused_not_lost(lake_table, monkeypatch) -> None:
    """A write that reaches the leader after the coordinator read its high watermarks (here: from
    inside that read) must not be acknowledged and then dropped with the log: the partition's
    writes are fenced before the check, so it fails, and the lake holds everything acknowledged."""
    server, conn = lake_table
    _write(conn, _rows("d1", 0, 10), bucket=0)
    _lake_holds_everything(server, conn, "d1")
    assert server.coordinator is not None
    notifier = server.coordinator.coordinator._notifier
    describe = notifier.describe_buckets
    racing: list[object] = []

    def describe_then_write(*args, **kwargs):
        described = describe(*args, **kwargs)
        if not racing:
            with lakelog.connect(server.address, {"client.writer.delivery-timeout": "2s"}) as writer_conn:
                try:
                    racing.append(_write(writer_conn, _rows("d1", 10, 5), bucket=1))
                except lakelog.LakelogError as error:
                    racing.append(error)
        return described

    monkeypatch.setattr(notifier, "describe_buckets", describe_then_write)
    conn.admin.drop_partition(PATH, {"dt": "d1"})
    assert isinstance(racing[0], lakelog.LakelogError), f"a write during the drop was acknowledged and dropped with the log: {racing[0]}"
    assert [p.lake_only for p in conn.admin.list_partition_infos(PATH)] == [True]


def test_a_write_the_leader_let_in_just_before_the_fence_is_refused_not_lost(lake_table, monkeypatch) -> None:
    """A write can be past the leader's first checks when the fence lands and reach the log only
    after the coordinator read the high watermarks. The fence is checked again under the log's
    append lock (and the leader settles what it let in before it answers the fence), so that write
    fails too: nothing acknowledged goes with the dropped log."""
    server, conn = lake_table
    _write(conn, _rows("d1", 0, 10), bucket=0)
    _lake_holds_everything(server, conn, "d1")
    assert server.coordinator is not None and server.tablet is not None
    replicas = server.tablet.replicas
    check_batch = replicas._check_batch
    in_check, described = threading.Event(), threading.Event()

    def check_then_wait(*args, **kwargs):  # the write is past the fence check here, before the log's lock
        in_check.set()
        assert described.wait(30), "the coordinator never read the high watermarks"
        return check_batch(*args, **kwargs)

    monkeypatch.setattr(replicas, "_check_batch", check_then_wait)
    outcome: list[object] = []

    def write() -> None:
        with lakelog.connect(server.address, {"client.writer.delivery-timeout": "2s"}) as writer_conn:
            try:
                outcome.append(_write(writer_conn, _rows("d1", 10, 5), bucket=1))
            except lakelog.LakelogError as error:
                outcome.append(error)

    writer = threading.Thread(target=write)
    writer.start()
    assert in_check.wait(30)
    _signal_after_describe(server, monkeypatch, described)  # then the write goes on
    conn.admin.drop_partition(PATH, {"dt": "d1"})
    writer.join(60)
    assert isinstance(outcome[0], lakelog.LakelogError), f"a write let in before the fence was acknowledged and dropped with the log: {outcome[0]}"
    assert [p.lake_only for p in conn.admin.list_partition_infos(PATH)] == [True]


def test_a_write_in_the_log_but_not_yet_durable_when_the_fence_lands_is_counted(lake_table, monkeypatch) -> None:
    """A write appended to the log whose fsync is still running when the fence lands is not in the
    high watermark yet, but will be acknowledged. The leader answers the fence only once what it
    let in is durable, so the coordinator sees that write and refuses the drop; the write stays."""
    server, conn = lake_table
    _write(conn, _rows("d1", 0, 10), bucket=0)
    _lake_holds_everything(server, conn, "d1")
    _write(conn, _rows("d1", 10, 1), bucket=1)
    _lake_holds_everything(server, conn, "d1")
    assert server.coordinator is not None and server.tablet is not None
    (partition,) = conn.admin.list_partition_infos(PATH)
    tablet = server.tablet.replicas._logs.get(partition.partition_id, 1)
    lead_flush = tablet._lead_flush
    flushing, described = threading.Event(), threading.Event()

    def slow_flush():  # this write's fsync lasts until the coordinator read the high watermarks, or 1 s
        flushing.set()
        described.wait(1)
        return lead_flush()

    monkeypatch.setattr(tablet, "_lead_flush", slow_flush)
    outcome: list[object] = []
    writer = threading.Thread(target=lambda: outcome.append(_write(conn, _rows("d1", 11, 5), bucket=1)))
    writer.start()
    assert flushing.wait(30)
    _signal_after_describe(server, monkeypatch, described)  # then the flush finishes
    with pytest.raises(lakelog.errors.PartitionNotInLakeError, match="bucket 1: the log ends at 6, the lake at 1"):
        conn.admin.drop_partition(PATH, {"dt": "d1"})
    writer.join(60)
    assert [ack.base_offset for ack in outcome[0]] == [1]
    assert conn.admin.list_offsets(PATH, partition_name="d1") == {0: 10, 1: 6}


def test_a_refused_drop_lifts_the_fence(lake_table) -> None:
    server, conn = lake_table
    _write(conn, _rows("d1", 0, 10), bucket=0)
    _lake_holds_everything(server, conn, "d1")
    _write(conn, _rows("d1", 10, 3), bucket=1)  # not in the lake
    with pytest.raises(lakelog.errors.PartitionNotInLakeError, match="bucket 1: the log ends at 3, the lake at 0"):
        conn.admin.drop_partition(PATH, {"dt": "d1"})
    assert [ack.base_offset for ack in _write(conn, _rows("d1", 13, 2), bucket=1)] == [3]
    assert conn.admin.list_offsets(PATH, partition_name="d1") == {0: 10, 1: 5}


def test_a_lake_only_partition_answers_offsets_and_descriptions_from_the_lake(lake_table) -> None:
    server, conn = lake_table
    _write(conn, _rows("d1", 0, 10), bucket=0)
    _write(conn, _rows("d1", 10, 4), bucket=1)
    _lake_holds_everything(server, conn, "d1")
    conn.admin.drop_partition(PATH, {"dt": "d1"})
    described = conn.admin.describe_buckets(PATH, partition_name="d1")
    assert described == {
        0: BucketInfo(-1, 10, -1, lake_log_start_offset=0, lake_log_end_offset=10),
        1: BucketInfo(-1, 4, -1, lake_log_start_offset=0, lake_log_end_offset=4),
    }
    assert conn.admin.list_offsets(PATH, partition_name="d1") == {0: 10, 1: 4}
    assert conn.admin.list_offsets(PATH, [1], lakelog.OffsetSpec.earliest(), partition_name="d1") == {1: 0}
    with pytest.raises(lakelog.errors.UnknownBucketError, match="no bucket 2"):
        conn.admin.list_offsets(PATH, [2], partition_name="d1")


def test_a_partitioned_table_leads_no_buckets_of_its_own(tmp_path, server_factory: Callable[..., ServerProcess]) -> None:
    """Its buckets are its partitions': creating it needs no tablet server, and a tablet server
    keeps logs of its partitions only."""
    coordinator = ServerProcess({"data.dir": str(tmp_path / "c"), "server.port": 0}, ("coordinator",)).start()
    try:
        with lakelog.connect(coordinator.address, {"client.request-timeout": "2s"}) as conn:
            conn.admin.create_database("shop")
            conn.admin.create_table(PATH, lakelog.TableDescriptor(SCHEMA, BUCKETS, partition_keys=["dt"]))
            with pytest.raises(lakelog.errors.NoTabletServerError):
                conn.admin.create_partition(PATH, {"dt": "d1"})
    finally:
        coordinator.stop(0)
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        conn.admin.create_database("shop")
        conn.admin.create_table(PATH, lakelog.TableDescriptor(SCHEMA, BUCKETS, partition_keys=["dt"]))
        _write(conn, _rows("d1", 0, 3), bucket=0)
        (partition,) = conn.admin.list_partition_infos(PATH)
        log_root = server.data_dir / "tablet-server" / "log" / str(conn.admin.get_table_info(PATH).table_id)
        assert {d.name for d in log_root.iterdir()} == {f"p{partition.partition_id}"}


def test_a_partition_dropped_empty_before_any_tiering_round_is_read_as_empty(lake_table) -> None:
    """The lake holds all of an empty partition without a snapshot: it drops, and then answers with
    empty ranges where the coordinator has no lake snapshot of the table yet."""
    _, conn = lake_table
    conn.admin.create_partition(PATH, {"dt": "d2"})
    conn.admin.drop_partition(PATH, {"dt": "d2"})
    assert conn.admin.list_offsets(PATH, partition_name="d2") == {0: 0, 1: 0}
    assert conn.admin.describe_buckets(PATH, partition_name="d2")[1] == BucketInfo(-1, 0, -1, lake_log_start_offset=0, lake_log_end_offset=0)
    with conn.get_table(PATH).new_scan().create_log_scanner() as scanner:
        scanner.subscribe_from_beginning()
        assert scanner.poll_arrow(timeout_ms=500).num_rows == 0
        (gone,) = conn.admin.list_partition_infos(PATH)
        assert scanner.positions() == {(gone.partition_id, 0): 0, (gone.partition_id, 1): 0}
