"""Partitioned tables on real servers: partitions as coordinator metadata, writes and scans per
partition, dropping a partition."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

import grpc
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute in the tests below
import pyarrow.fs as pafs
import pytest

import lakelog
from lakelog.client.rpc.coordinator_gateway import CoordinatorGateway
from lakelog.errors import PartitionNotExistError
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceStub
from lakelog.rpc.rpc_edge import RpcEdge
from lakelog.server.server_process import ServerProcess
from tests.harness.remote_tier import Remote
from tests.harness.metrics_scrape import Scrape
from tests.harness.s3 import MotoS3
from tests.harness.server_subprocess import ServerSubprocess
from tests.harness.waiting import wait_until

EVENTS = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("amount", pa.float64())])
PATH = lakelog.TablePath("shop", "events")
REMOTE_CONF = {"log.segment.max-bytes": "64kb", "remote.log.task-interval": "1h"}


def _partitioned(conn: lakelog.Connection, buckets: int = 2, properties: dict[str, str] | None = None) -> lakelog.Table:
    conn.admin.create_database("shop", ignore_if_exists=True)
    conn.admin.create_table(PATH, lakelog.TableDescriptor(EVENTS, buckets, properties or {}, partition_keys=["dt"]))
    return conn.get_table(PATH)


def test_partitions_are_created_listed_and_dropped_and_ids_never_come_back(
    server_factory: Callable[..., ServerProcess], tmp_path
) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        _partitioned(conn)
        first = conn.admin.create_partition(PATH, {"dt": "2026-11-23"})
        second = conn.admin.create_partition(PATH, {"dt": "2026-11-24"})
        assert conn.admin.list_partition_infos(PATH) == [
            lakelog.PartitionInfo(first, "2026-11-23"),
            lakelog.PartitionInfo(second, "2026-11-24"),
        ]
        with pytest.raises(lakelog.PartitionAlreadyExistsError, match="2026-11-23"):
            conn.admin.create_partition(PATH, {"dt": "2026-11-23"})
        assert conn.admin.create_partition(PATH, {"dt": "2026-11-23"}, ignore_if_exists=True) == first
        conn.admin.drop_partition(PATH, {"dt": "2026-11-23"})
        with pytest.raises(lakelog.PartitionNotExistError, match="2026-11-23"):
            conn.admin.drop_partition(PATH, {"dt": "2026-11-23"})
        conn.admin.drop_partition(PATH, {"dt": "2026-11-23"}, ignore_if_not_exists=True)
        again = conn.admin.create_partition(PATH, {"dt": "2026-11-23"})
        assert again not in (first, second)
    server.stop(0)
    server = server_factory(tmp_path / "data")
    with lakelog.connect(server.address) as conn:
        assert conn.admin.list_partition_infos(PATH) == [
            lakelog.PartitionInfo(second, "2026-11-24"),
            lakelog.PartitionInfo(again, "2026-11-23"),
        ]
        conn.admin.drop_partition(PATH, {"dt": "2026-11-23"})
        assert conn.admin.create_partition(PATH, {"dt": "2026-11-25"}) > again


@pytest.mark.parametrize(
    "spec, match",
    [
        ({"dt": "a/b"}, "a/b"),
        ({"dt": ".."}, r"'\.\.'"),
        ({"dt": "x..y"}, "x..y"),
        ({"dt": ""}, "''"),
        ({"dt": 20261123}, "int"),
        ({"dt": "a$b"}, r"a\$b"),
        ({"day": "2026-11-23"}, "exactly the partition keys"),
        ({"dt": "2026-11-23", "id": "1"}, "exactly the partition keys"),
    ],
)
def test_bad_partition_values_are_refused_by_name(conn: lakelog.Connection, spec: dict, match: str) -> None:
    _partitioned(conn)
    with pytest.raises(lakelog.InvalidPartitionError, match=match):
        conn.admin.create_partition(PATH, spec)
    assert conn.admin.list_partition_infos(PATH) == []


def test_the_coordinator_checks_partition_values_itself(server: ServerProcess, conn: lakelog.Connection) -> None:
    """A client that skips the checks (here: the raw gateway) is refused by the coordinator too."""
    _partitioned(conn)
    with pytest.raises(lakelog.InvalidPartitionError, match=r"'\.\./x'"):
        CoordinatorGateway(RpcEdge(conn.config), [server.address]).create_partition(PATH, {"dt": "../x"}, False)
    assert conn.admin.list_partition_infos(PATH) == []


def test_too_many_partitions(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory(**{"max.partition.num": 3})
    with lakelog.connect(server.address) as conn:
        _partitioned(conn)
        for day in range(3):
            conn.admin.create_partition(PATH, {"dt": f"d{day}"})
        with pytest.raises(lakelog.TooManyPartitionsError, match="max.partition.num"):
            conn.admin.create_partition(PATH, {"dt": "d3"})
        conn.admin.drop_partition(PATH, {"dt": "d0"})
        conn.admin.create_partition(PATH, {"dt": "d3"})
        assert [p.partition_name for p in conn.admin.list_partition_infos(PATH)] == ["d1", "d2", "d3"]


def test_partition_keys_must_be_string_columns(conn: lakelog.Connection) -> None:
    conn.admin.create_database("shop", ignore_if_exists=True)
    with pytest.raises(lakelog.InvalidTableError, match="'id'.*string"):
        conn.admin.create_table(PATH, lakelog.TableDescriptor(EVENTS, 2, partition_keys=["id"]))
    with pytest.raises(lakelog.InvalidPartitionError, match="not partitioned"):
        conn.admin.create_table(lakelog.TablePath("shop", "plain"), lakelog.TableDescriptor(EVENTS, 2))
        conn.admin.create_partition(lakelog.TablePath("shop", "plain"), {"dt": "x"})


def _cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lakelog", *args, "--bootstrap", server.address], capture_output=True, text=True, timeout=120
    )


def test_partition_cli(server: ServerProcess) -> None:
    created = _cli(server, "table", "create", "shop.events", "--schema", "dt:string,id:int64", "--partition-key", "dt", "--buckets", "2")
    assert created.returncode == 0, created.stderr
    assert _cli(server, "partition", "create", "shop.events", "2026-11-23").returncode == 0
    assert _cli(server, "partition", "create", "shop.events", "--spec", "dt=2026-11-24").returncode == 0
    bad = _cli(server, "partition", "create", "shop.events", "../etc")
    assert bad.returncode != 0 and "../etc" in bad.stderr
    listed = _cli(server, "partition", "list", "shop.events", "--output", "json")
    assert [p["partition_name"] for p in json.loads(listed.stdout)] == ["2026-11-23", "2026-11-24"]
    assert _cli(server, "partition", "drop", "shop.events", "2026-11-23").returncode == 0
    text = _cli(server, "partition", "list", "shop.events").stdout
    assert "2026-11-24" in text and "2026-11-23" not in text
    described = _cli(server, "table", "describe", "shop.events", "--output", "json")
    assert json.loads(described.stdout)["partition_keys"] == ["dt"]


def _rows(day: str, start: int, count: int) -> pa.Table:
    return pa.table({"dt": [day] * count, "id": list(range(start, start + count)), "amount": [1.0] * count}, schema=EVENTS)


def test_rows_go_to_their_partition_and_a_batch_spanning_partitions_is_split(server: ServerProcess, conn: lakelog.Connection) -> None:
    table = _partitioned(conn)
    conn.admin.create_partition(PATH, {"dt": "2026-11-23"})
    with table.new_append().create_writer() as writer:
        writer.append_arrow(pa.concat_tables([_rows("2026-11-23", 0, 300), _rows("2026-11-24", 300, 200), _rows("2026-11-23", 500, 5)]))
        writer.append({"dt": "2026-11-25", "id": 999, "amount": 2.0})
    names = [p.partition_name for p in conn.admin.list_partition_infos(PATH)]
    assert names == ["2026-11-23", "2026-11-24", "2026-11-25"]
    ends = {name: sum(conn.admin.list_offsets(PATH, partition_name=name).values()) for name in names}
    assert ends == {"2026-11-23": 305, "2026-11-24": 200, "2026-11-25": 1}
    assert all(b.high_watermark >= 0 for b in conn.admin.describe_buckets(PATH, partition_name="2026-11-24").values())
    with pytest.raises(lakelog.InvalidPartitionError, match="name a partition"):
        conn.admin.list_offsets(PATH)
    with pytest.raises(lakelog.PartitionNotExistError, match="2026-12-01"):
        conn.admin.list_offsets(PATH, partition_name="2026-12-01")


def test_small_arrow_inputs_go_out_in_batch_size_pieces_per_partition_in_order(server: ServerProcess) -> None:
    """Arrow inputs each holding a few rows of every partition are not sent piece by piece: each
    partition's rows go out in about ``client.writer.batch-size`` pieces, in the order appended,
    a row appended after them follows them, and rows that never fill a batch go after
    ``client.writer.linger`` without a flush."""
    batch_rows = 1000
    config = {"client.writer.batch-size": str(batch_rows * _rows("d0", 0, 1000).nbytes // 1000), "client.writer.linger": "500ms"}
    acks: list[lakelog.AppendAck] = []
    with lakelog.connect(server.address, config) as conn:
        table = _partitioned(conn, buckets=1)
        days = ["d0", "d1", "d2"]
        ids = pa.array(range(6000), pa.int64())
        rows = pa.table({"dt": [days[n % 3] for n in range(6000)], "id": ids, "amount": pa.compute.cast(ids, pa.float64())}, schema=EVENTS)
        inputs = [rows.slice(first, 100) for first in range(0, 6000, 100)]  # 60 inputs, each over the three partitions
        with table.new_append().create_writer(on_ack=acks.append) as writer:
            for each in inputs:
                writer.append_arrow(each)
            writer.append({"dt": "d0", "id": 6000, "amount": 2.0})
            writer.flush()
            assert len(acks) <= 3 * 3, f"{len(acks)} produce requests for 3 partitions of 2,000 rows and batches of {batch_rows}"
            writer.append_arrow(_rows("d1", 7000, 5))
            wait_until(lambda: conn.admin.list_offsets(PATH, partition_name="d1") == {0: 2005}, "the lingering rows sent")
        with table.new_scan().project(["dt", "id"]).create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            got = scanner.to_arrow()
    for day in days:
        ids = got.filter(pa.compute.equal(got.column("dt"), day)).column("id").to_pylist()
        expected = [n for n in range(6000) if days[n % 3] == day] + {"d0": [6000], "d1": [7000, 7001, 7002, 7003, 7004], "d2": []}[day]
        assert ids == expected


def test_rows_of_a_table_with_two_partition_keys_read_back_whole(server: ServerProcess, conn: lakelog.Connection) -> None:
    """Keys listed in another order than the schema's, neither of them first: each row reads back
    with every column as written, its key values included, in its partition."""
    schema = pa.schema([("id", pa.int64()), ("region", pa.string()), ("amount", pa.float64()), ("dt", pa.string())])
    path = lakelog.TablePath("shop", "regional")
    conn.admin.create_database("shop", ignore_if_exists=True)
    conn.admin.create_table(path, lakelog.TableDescriptor(schema, 2, partition_keys=["dt", "region"]))
    ids = list(range(400))
    rows = pa.table(
        {"id": ids, "region": [("eu", "us")[n % 2] for n in ids], "amount": [n / 4 for n in ids], "dt": [("d1", "d2")[n // 200] for n in ids]},
        schema=schema,
    )
    with conn.get_table(path).new_append().create_writer() as writer:
        writer.append_arrow(rows)
    names = sorted(p.partition_name for p in conn.admin.list_partition_infos(path))
    assert names == ["d1$eu", "d1$us", "d2$eu", "d2$us"]
    with conn.get_table(path).new_scan().create_log_scanner() as scanner:
        scanner.subscribe_from_beginning()
        got = scanner.to_arrow()
    assert got.select(schema.names).sort_by("id").equals(rows)


def test_bad_partition_values_in_a_write_write_nothing(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory()
    with lakelog.connect(server.address, {"client.writer.dynamic-create-partition.enabled": "false"}) as conn:
        table = _partitioned(conn)
        conn.admin.create_partition(PATH, {"dt": "2026-11-23"})
        with table.new_append().create_writer() as writer:
            with pytest.raises(lakelog.InvalidPartitionError, match="a/b"):
                writer.append_arrow(pa.concat_tables([_rows("2026-11-23", 0, 10), _rows("a/b", 10, 1)]))
            with pytest.raises(lakelog.InvalidPartitionError, match="no value for partition key 'dt'"):
                writer.append_arrow(pa.table({"dt": ["2026-11-23", None], "id": [1, 2], "amount": [1.0, 2.0]}, schema=EVENTS))
            with pytest.raises(lakelog.PartitionNotExistError, match="2026-11-24"):
                writer.append_arrow(pa.concat_tables([_rows("2026-11-23", 0, 10), _rows("2026-11-24", 10, 1)]))
            with pytest.raises(lakelog.PartitionNotExistError, match="2026-11-24"):
                writer.append({"dt": "2026-11-24", "id": 1, "amount": 1.0})
            with pytest.raises(lakelog.InvalidPartitionError, match="int"):
                writer.append({"dt": 5, "id": 1, "amount": 1.0})
        assert conn.admin.list_offsets(PATH, partition_name="2026-11-23") == {0: 0, 1: 0}
        assert [p.partition_name for p in conn.admin.list_partition_infos(PATH)] == ["2026-11-23"]


def test_dropping_a_partition_deletes_its_local_log(server: ServerProcess, conn: lakelog.Connection) -> None:
    table = _partitioned(conn)
    with table.new_append().create_writer() as writer:
        writer.append_arrow(pa.concat_tables([_rows("keep", 0, 50), _rows("gone", 50, 50)]))
    ids = {p.partition_name: p.partition_id for p in conn.admin.list_partition_infos(PATH)}
    info = conn.admin.get_table_info(PATH)
    log_root = server.data_dir / "tablet-server" / "log" / str(info.table_id)
    assert {d.name for d in log_root.iterdir()} >= {f"p{ids['keep']}", f"p{ids['gone']}"}
    conn.admin.drop_partition(PATH, {"dt": "gone"})
    assert not (log_root / f"p{ids['gone']}").exists()
    assert (log_root / f"p{ids['keep']}").exists()
    assert sum(conn.admin.list_offsets(PATH, partition_name="keep").values()) == 50
    with table.new_append().create_writer() as writer:
        writer.append_arrow(_rows("gone", 0, 7))
    recreated = {p.partition_name: p.partition_id for p in conn.admin.list_partition_infos(PATH)}["gone"]
    assert recreated != ids["gone"]
    assert sum(conn.admin.list_offsets(PATH, partition_name="gone").values()) == 7


def test_a_partition_dropped_and_created_again_is_asked_under_its_new_id(server: ServerProcess, conn: lakelog.Connection) -> None:
    """The admin caches a partition's id by name; once the name means a new partition, the first
    leader that no longer knows the old id makes it look the name up again."""
    _partitioned(conn)
    first = conn.admin.create_partition(PATH, {"dt": "again"})
    assert conn.admin.list_offsets(PATH, partition_name="again") == {0: 0, 1: 0}
    conn.admin.drop_partition(PATH, {"dt": "again"})
    assert conn.admin.create_partition(PATH, {"dt": "again"}) != first
    with lakelog.connect(server.address) as other, other.get_table(PATH).new_append().create_writer() as writer:
        writer.append_arrow(_rows("again", 0, 7))
    assert sum(conn.admin.list_offsets(PATH, partition_name="again").values()) == 7
    assert sum(info.high_watermark for info in conn.admin.describe_buckets(PATH, partition_name="again").values()) == 7


def test_a_writer_whose_partition_another_client_dropped_and_created_again_writes_to_the_new_one(
    server: ServerProcess, conn: lakelog.Connection
) -> None:
    """Rows already on their way to the dropped partition fail by name (they are not moved to
    another partition); the writer looks its partitions up again, so the next rows of that name go
    to the new partition."""
    writer = _partitioned(conn, buckets=1).new_append().create_writer()
    writer.append_arrow(_rows("d1", 0, 5))
    writer.flush()
    with lakelog.connect(server.address) as other:
        other.admin.drop_partition(PATH, {"dt": "d1"})
        other.admin.create_partition(PATH, {"dt": "d1"})
    writer.append_arrow(_rows("d1", 5, 3))
    with pytest.raises(lakelog.PartitionNotExistError, match="no partition with id"):
        writer.flush()
    writer.append_arrow(_rows("d1", 8, 2))
    writer.close()
    scanner = conn.get_table(PATH).new_scan().create_log_scanner()
    scanner.subscribe_from_beginning()
    assert sorted(record.row["id"] for record in _poll_until(scanner, 2)) == [8, 9]


def _poll_until(scanner: object, expected: int, timeout_s: float = 60.0) -> list[lakelog.ScanRecord]:
    import time

    got: list[lakelog.ScanRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < expected:
        assert time.monotonic() < deadline, f"only {len(got)} of {expected} records arrived"
        got += list(scanner.poll(timeout_ms=300))  # type: ignore[attr-defined]
    return got


def test_scan_from_beginning_reads_every_partition_now_and_later_and_ends_dropped_ones(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = server_factory()
    with lakelog.connect(server.address, {"client.scanner.partition-discovery.interval": "200ms"}) as conn:
        table = _partitioned(conn, buckets=3)
        with table.new_append().create_writer() as writer:
            writer.append_arrow(pa.concat_tables([_rows("d1", 0, 400), _rows("d2", 400, 300)]))
        ids = {p.partition_name: p.partition_id for p in conn.admin.list_partition_infos(PATH)}
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            first = _poll_until(scanner, 700)
            with table.new_append().create_writer() as writer:
                writer.append_arrow(_rows("d3", 700, 50))  # a partition created after the subscription
            later = _poll_until(scanner, 50)
            conn.admin.drop_partition(PATH, {"dt": "d1"})
            with table.new_append().create_writer() as writer:
                writer.append_arrow(_rows("d2", 750, 10))
            last = _poll_until(scanner, 10)
            assert len(scanner.poll(timeout_ms=500)) == 0  # the dropped partition ended quietly
            positions = scanner.positions()
        ids["d3"] = next(p.partition_id for p in conn.admin.list_partition_infos(PATH) if p.partition_name == "d3")
        records = first + later + last
        assert sorted(r.row["id"] for r in records) == list(range(760))
        assert all(r.partition_id == ids[r.row["dt"]] for r in records)
        by_bucket: dict[tuple[int, int], list[int]] = {}
        for r in records:
            by_bucket.setdefault((r.partition_id, r.bucket), []).append(r.offset)
        assert all(offsets == list(range(len(offsets))) for offsets in by_bucket.values())
        ids_in_log_order = {}
        for r in sorted(records, key=lambda r: (r.partition_id, r.bucket, r.offset)):
            ids_in_log_order.setdefault((r.partition_id, r.bucket), []).append(r.row["id"])
        assert all(found == sorted(found) for found in ids_in_log_order.values())  # appended order kept
        assert {pid for pid, _ in positions} == {ids["d2"], ids["d3"]}


def test_a_scan_of_many_partitions_lists_their_offsets_in_one_call_per_leader(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory(**{"metrics.port": 0})
    days = [f"d{n:02d}" for n in range(12)]
    with lakelog.connect(server.address) as conn:
        table = _partitioned(conn, buckets=2)
        acks: list[lakelog.AppendAck] = []
        with table.new_append().create_writer(on_ack=acks.append) as writer:
            writer.append_arrow(pa.concat_tables([_rows(day, 100 * n, n + 1) for n, day in enumerate(days)]))
        with table.new_append().create_writer(on_ack=acks.append) as writer:  # later: a timestamp between the two
            writer.append_arrow(pa.concat_tables([_rows(day, 100 * n + 50, 2) for n, day in enumerate(days)]))
        calls = lambda: Scrape(server)("lakelog_rpc_duration_seconds_count", method="ListOffsets")  # noqa: E731
        before = calls()
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            assert calls() == before + 1
            got = _poll_until(scanner, sum(n + 3 for n in range(len(days))))
        assert sorted(r.row["id"] for r in got) == sorted(i for n in range(len(days)) for i in [*range(100 * n, 101 * n + 1), 100 * n + 50, 100 * n + 51])

        # The same answers as asking partition by partition, for every kind of offset.
        infos = [table.info.for_partition(p) for p in conn.admin.list_partition_infos(PATH)]
        ids = {info.partition_name: info.partition_id for info in infos}
        second = max(ack.commit_timestamp for ack in acks)
        for spec in (lakelog.OffsetSpec.earliest(), lakelog.OffsetSpec.latest(), lakelog.OffsetSpec.timestamp(second)):
            one_by_one = {ids[day]: conn.admin.list_offsets(PATH, spec=spec, partition_name=day) for day in days}
            assert conn.admin.list_partitions_offsets(infos, spec=spec) == one_by_one
        assert conn.admin.list_partitions_offsets(infos, [1], lakelog.OffsetSpec.latest()) == {
            ids[day]: {1: conn.admin.list_offsets(PATH, [1], partition_name=day)[1]} for day in days
        }
        # A partition dropped since it was listed answers None; the others still answer.
        conn.admin.drop_partition(PATH, {"dt": "d03"})
        listed = conn.admin.list_partitions_offsets(infos)
        assert listed[ids["d03"]] is None
        assert sum(sum(offsets.values()) for offsets in listed.values() if offsets) == sum(n + 3 for n in range(len(days))) - 6


def test_a_list_offsets_request_names_each_answers_partition_and_a_missing_one_is_refused_alone(
    server: ServerProcess, conn: lakelog.Connection
) -> None:
    table = _partitioned(conn, buckets=2)
    with table.new_append().create_writer() as writer:
        writer.append_arrow(pa.concat_tables([_rows("a", 0, 3), _rows("b", 3, 5)]))
    ids = {p.partition_name: p.partition_id for p in conn.admin.list_partition_infos(PATH)}
    request = pb.ListOffsetsRequest(
        offset_type=pb.LATEST,
        table_id=table.info.table_id,
        partition_id=ids["a"],
        bucket_id=[0, 1],
        partitions_req=[
            pb.PbListOffsetsReqForPartition(partition_id=999, bucket_id=[0]),
            pb.PbListOffsetsReqForPartition(partition_id=ids["b"], bucket_id=[0, 1]),
        ],
    )
    with grpc.insecure_channel(server.address) as channel:
        answers = TabletServiceStub(channel).ListOffsets(request).buckets_resp
    assert [(a.partition_id, a.bucket_id) for a in answers] == [(ids["a"], 0), (ids["a"], 1), (999, 0), (ids["b"], 0), (ids["b"], 1)]
    assert [a.error_code for a in answers] == [0, 0, PartitionNotExistError.code, 0, 0]
    assert "999" in answers[2].error_message
    assert sum(a.offset for a in answers[:2]) == 3 and sum(a.offset for a in answers[3:]) == 5
    too_many = pb.ListOffsetsRequest(
        offset_type=pb.LATEST, table_id=table.info.table_id,
        partitions_req=[pb.PbListOffsetsReqForPartition(partition_id=ids["a"], bucket_id=[0] * 600) for _ in range(2)],
    )
    with grpc.insecure_channel(server.address) as channel, pytest.raises(grpc.RpcError) as refused:
        TabletServiceStub(channel).ListOffsets(too_many)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "1200 buckets" in str(refused.value.details())


def test_subscribe_one_partition_and_the_columnar_form(server: ServerProcess, conn: lakelog.Connection) -> None:
    table = _partitioned(conn, buckets=1)
    with table.new_append().create_writer() as writer:
        writer.append_arrow(pa.concat_tables([_rows("a", 0, 20), _rows("b", 20, 30)]))
    ids = {p.partition_name: p.partition_id for p in conn.admin.list_partition_infos(PATH)}
    with table.new_scan().project(["id"]).create_log_scanner() as scanner:
        scanner.subscribe(0, 5, partition_id=ids["b"])
        got = scanner.to_arrow()
        assert got.column_names == ["id", "__bucket", "__offset", "__timestamp", "__partition_id"]
        assert got.column("id").to_pylist() == list(range(25, 50))
        assert set(got.column("__partition_id").to_pylist()) == {ids["b"]}
        with pytest.raises(lakelog.InvalidPartitionError, match="partition_id"):
            scanner.subscribe(0, 0)
        with pytest.raises(lakelog.PartitionNotExistError, match="12345"):
            scanner.subscribe_partition(12345, 0, 0)
        scanner.subscribe_partition(ids["a"], 0, 18)
        polled = scanner.poll_arrow(timeout_ms=5000)
        assert sorted(polled.column("id").to_pylist()) == [18, 19]


def test_partitions_tier_to_remote_storage_on_s3_and_a_drop_deletes_the_remote_log(
    server_factory: Callable[..., ServerProcess], moto_s3: MotoS3
) -> None:
    remote = Remote({**REMOTE_CONF, "remote.data.dir": f"s3://{moto_s3.create_bucket()}/lakelog", **moto_s3.settings()})
    server = server_factory(**remote.conf)
    client_conf = {k: v for k, v in remote.conf.items() if k.startswith("remote.fs.")}
    with lakelog.connect(server.address, client_conf) as conn:
        table = _partitioned(conn, buckets=1, properties={"table.log.tiered.local-segments": "1"})
        with table.new_append().create_writer() as writer:
            for batch in range(60):
                for day in ("d1", "d2"):
                    writer.append_arrow(_rows(day, batch * 100, 100))
                writer.flush()
        assert server.tablet is not None
        server.tablet.remote.run_once()
        server.tablet.remote.run_once()
        ids = {p.partition_name: p.partition_id for p in conn.admin.list_partition_infos(PATH)}
        table_dir = remote.root.child("log", "shop", f"events-{table.info.table_id}")
        for day in ("d1", "d2"):
            bucket = conn.admin.describe_buckets(PATH, partition_name=day)[0]
            assert bucket.remote_log_start_offset == 0 and bucket.local_log_start_offset > 0, bucket
            manifest = json.loads(remote.read(table_dir.child(f"{day}-{ids[day]}", "0", "manifest.json")))
            assert manifest["segments"]
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            rows = scanner.to_arrow()
            assert scanner.records_by_tier()["remote"] > 0
        for day in ("d1", "d2"):
            mine = rows.filter(pa.compute.equal(rows.column("dt"), day))
            assert mine.column("__offset").to_pylist() == list(range(6000))
            assert set(mine.column("__partition_id").to_pylist()) == {ids[day]}
        conn.admin.drop_partition(PATH, {"dt": "d1"})
        server.tablet.remote.run_once()
        listing = remote.fs().get_file_info(pafs.FileSelector(table_dir.path, allow_not_found=True))
        assert {info.base_name for info in listing} == {f"d2-{ids['d2']}"}


AUTO = {
    "table.auto-partition.enabled": "true",
    "table.auto-partition.time-unit": "day",
    "table.auto-partition.num-precreate": "3",
    "table.auto-partition.num-retention": "2",
    "table.auto-partition.time-zone": "Pacific/Kiritimati",
}


def test_auto_partitioning_precreates_ahead_and_drops_past_retention(server_factory: Callable[..., ServerProcess]) -> None:
    import datetime
    import time
    import zoneinfo

    server = server_factory(**{"coordinator.auto-partition.check-interval": "200ms"})
    with lakelog.connect(server.address) as conn:
        _partitioned(conn, properties=AUTO)
        today = datetime.datetime.now(zoneinfo.ZoneInfo("Pacific/Kiritimati")).date()
        days = [(today + datetime.timedelta(days=step)).strftime("%Y%m%d") for step in range(3)]
        names = [p.partition_name for p in conn.admin.list_partition_infos(PATH)]
        assert set(days[1:]) <= set(names) and len(names) >= 3, names  # today's may be a new day's by now
        old = (today - datetime.timedelta(days=5)).strftime("%Y%m%d")
        kept = (today - datetime.timedelta(days=2)).strftime("%Y%m%d")
        for name in (old, kept, "manual"):
            conn.admin.create_partition(PATH, {"dt": name})
        deadline = time.monotonic() + 30
        while old in {p.partition_name for p in conn.admin.list_partition_infos(PATH)}:
            assert time.monotonic() < deadline, "the expired partition was never dropped"
            time.sleep(0.1)
        left = {p.partition_name for p in conn.admin.list_partition_infos(PATH)}
        assert {kept, "manual", *days[1:]} <= left


@pytest.mark.parametrize(
    "properties, keys, match",
    [
        ({"table.auto-partition.enabled": "true"}, ["dt", "region"], "exactly one partition key"),
        ({"table.auto-partition.enabled": "true"}, [], "exactly one partition key"),
        ({"table.auto-partition.time-unit": "week"}, ["dt"], "week"),
        ({"table.auto-partition.time-zone": "Mars/Olympus"}, ["dt"], "Mars/Olympus"),
        ({"table.auto-partition.num-precreate": "-1"}, ["dt"], "num-precreate"),
    ],
)
def test_bad_auto_partition_properties_are_refused(conn: lakelog.Connection, properties: dict, keys: list, match: str) -> None:
    schema = EVENTS.append(pa.field("region", pa.string()))
    conn.admin.create_database("shop", ignore_if_exists=True)
    with pytest.raises(lakelog.InvalidTableError, match=match):
        conn.admin.create_table(PATH, lakelog.TableDescriptor(schema, 2, properties, partition_keys=keys))
    assert not conn.admin.table_exists(PATH)


def test_scan_and_offsets_cli_take_a_partition(server: ServerProcess, conn: lakelog.Connection) -> None:
    table = _partitioned(conn, buckets=1)
    with table.new_append().create_writer() as writer:
        writer.append_arrow(pa.concat_tables([_rows("a", 0, 3), _rows("b", 3, 4)]))
    scanned = _cli(server, "scan", "shop.events", "--partition", "b", "--output", "jsonl")
    assert scanned.returncode == 0, scanned.stderr
    assert [json.loads(line)["id"] for line in scanned.stdout.splitlines()] == [3, 4, 5, 6]
    refused = _cli(server, "scan", "shop.events")
    assert refused.returncode != 0 and "--partition" in refused.stderr
    offsets = _cli(server, "offsets", "shop.events", "--partition", "a", "--output", "json")
    assert json.loads(offsets.stdout) == [{"bucket": 0, "offset": 3}]


def test_partitions_survive_a_restart_and_spread_over_two_tablet_servers(tmp_path) -> None:
    from tests.harness.membership import SECRET

    coordinator = ServerProcess({"data.dir": str(tmp_path / "c"), "server.port": 0, **SECRET}, ("coordinator",)).start()

    def tablet(number: int) -> ServerProcess:
        conf = {"data.dir": str(tmp_path / f"t{number}"), "server.port": 0, "coordinator.address": coordinator.address}
        return ServerProcess({**conf, "tablet-server.id": number, **SECRET}, ("tablet-server",)).start()

    tablets = [tablet(1), tablet(2)]
    try:
        with lakelog.connect(coordinator.address) as conn:
            table = _partitioned(conn, buckets=2)
            with table.new_append().create_writer() as writer:
                writer.append_arrow(pa.concat_tables([_rows(day, n * 100, 100) for n, day in enumerate(["a", "b", "c"])]))
            leaders = {b.leader for day in "abc" for b in conn.admin.describe_buckets(PATH, partition_name=day).values()}
            assert leaders == {1, 2}
        tablets[0].stop(0)
        tablets[0] = tablet(1)
        with lakelog.connect(coordinator.address) as conn:
            with conn.get_table(PATH).new_scan().create_log_scanner() as scanner:
                scanner.subscribe_from_beginning()
                got = _poll_until(scanner, 300)
            assert sorted(r.row["id"] for r in got) == list(range(300))
            with conn.get_table(PATH).new_append().create_writer() as writer:
                writer.append({"dt": "a", "id": 300, "amount": 0.0})
            assert sum(conn.admin.list_offsets(PATH, partition_name="a").values()) == 101
    finally:
        for process in [*tablets, coordinator]:
            process.stop(0)


def test_dropping_a_partitioned_table_deletes_every_partition_log(server: ServerProcess, conn: lakelog.Connection, caplog) -> None:
    table = _partitioned(conn)
    with table.new_append().create_writer() as writer:
        writer.append_arrow(pa.concat_tables([_rows("a", 0, 10), _rows("b", 10, 10)]))
    log_root = server.data_dir / "tablet-server" / "log" / str(table.info.table_id)
    assert log_root.exists()
    conn.admin.drop_table(PATH)
    assert not log_root.exists()
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    again = _partitioned(conn)
    with again.new_append().create_writer() as writer:
        writer.append_arrow(_rows("a", 0, 5))
    assert conn.admin.list_offsets(PATH, partition_name="a") != {}


def test_subscribe_from_timestamp_per_partition(server: ServerProcess, conn: lakelog.Connection) -> None:
    import time

    table = _partitioned(conn, buckets=1)
    with table.new_append().create_writer() as writer:
        writer.append_arrow(pa.concat_tables([_rows("a", 0, 10), _rows("b", 10, 10)]))
    time.sleep(0.01)
    acks: list[lakelog.AppendAck] = []
    with table.new_append().create_writer(on_ack=acks.append) as writer:
        writer.append_arrow(pa.concat_tables([_rows("a", 20, 3), _rows("b", 23, 4)]))
    since = min(ack.commit_timestamp for ack in acks)
    offsets = {day: conn.admin.list_offsets(PATH, spec=lakelog.OffsetSpec.timestamp(since), partition_name=day) for day in "ab"}
    assert offsets == {"a": {0: 10}, "b": {0: 10}}
    with table.new_scan().create_log_scanner() as scanner:
        scanner.subscribe_from_timestamp(since)
        got = _poll_until(scanner, 7)
    assert sorted(r.row["id"] for r in got) == list(range(20, 27))


def test_a_writers_threads_do_not_grow_with_its_partitions(tmp_path: Path) -> None:
    """One partition or thirty: the writer's batches go through the connection's one sender. The
    server runs in a process of its own, so every thread counted here is the client's."""
    server = ServerSubprocess(tmp_path / "data").start()
    earlier = set(threading.enumerate())  # an earlier test's threads may end meanwhile: not this writer's

    def threads() -> collections.Counter[str]:
        return collections.Counter(thread.name for thread in threading.enumerate() if thread not in earlier)

    try:
        with lakelog.connect(server.address) as conn:
            table = _partitioned(conn, buckets=4)
            with table.new_append().create_writer() as writer:
                writer.append_arrow(_rows("d00", 0, 100))
                writer.flush()
                one_partition = threads()
                for day in range(1, 30):
                    writer.append_arrow(_rows(f"d{day:02}", day * 100, 100))
                    writer.append({"dt": f"d{day:02}", "id": -day, "amount": 0.0})
                writer.flush()
                thirty_partitions = threads()
            assert thirty_partitions == one_partition, "threads by name, with one partition and with thirty"
            written = [sum(conn.admin.list_offsets(PATH, partition_name=f"d{day:02}").values()) for day in range(30)]
        assert written == [100] + [101] * 29
    finally:
        server.stop()
