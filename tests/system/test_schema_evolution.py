"""Schema evolution: columns added and widened without breaking history, on a real server.

A writer opened before a change keeps writing its schema, and one scan from offset 0 reads
every record, local and remote, in the current schema, projected or not; refused changes leave the
table as it was; the history survives a coordinator restart; the CLI alters and describes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pytest

import grpc

import lakelog
import lakelog.spark
from lakelog.client.rpc.messages import ProduceBucket, ProduceRequest
from lakelog.client.rpc.tablet_gateway import encode_produce_request
from lakelog.record.batch import encode_batch
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.cli.main import main
from lakelog.errors import InvalidAlterTableError, SchemaMismatchError, SchemaNotExistError
from lakelog.metadata import TableChange, TablePath
from lakelog.server.server_process import ServerProcess
from tests.harness.lake_tier import REMOTE_TIER, TIERED_SERVER, TIERED_TABLE, expire_remote, lake_table, run_tier, wait_for_remote
from tests.harness.tables import scan_all

V1 = pa.schema([("id", pa.int32()), ("name", pa.string()), ("dt", pa.string())])
PATH = TablePath("shop", "events")


# ---------------------------------------------------------------- through a real server


def rows(first: int, count: int, amount: bool) -> pa.RecordBatch:
    ids = list(range(first, first + count))
    columns = {"id": pa.array(ids, pa.int32() if not amount else pa.int64()), "name": [f"n{i}" for i in ids], "dt": ["d"] * count}
    if amount:
        columns["amount"] = [i / 2 for i in ids]
    return pa.record_batch(columns)


def expected(count: int, changed_from: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "dt": "d", "amount": i / 2 if i >= changed_from else None} for i in range(count)]


def read_all(table: lakelog.Table, count: int, columns: list[str] | None = None) -> list[dict]:
    scan = table.new_scan()
    scanner = (scan.project(columns) if columns else scan).create_log_scanner()
    scanner.subscribe_from_beginning()
    got = scan_all(scanner, count)
    return got.sort_by("__offset").select(columns or ["id", "name", "dt", "amount"]).to_pylist()


ALTER = [TableChange.widen_column("id", pa.int64()), TableChange.add_column("amount", pa.float64())]


@pytest.mark.parametrize("remote", ["file", "s3"])
def test_one_scan_reads_local_and_remote_records_of_every_schema_in_the_newest(
    server_factory: Callable[..., ServerProcess], moto_s3: Any, remote: str
) -> None:
    s3 = {"remote.data.dir": f"s3://{moto_s3.create_bucket()}/lakelog", **moto_s3.settings()} if remote == "s3" else {}
    server = server_factory(**REMOTE_TIER, **s3)
    with lakelog.connect(server.address, moto_s3.settings() if remote == "s3" else {}) as conn:
        conn.admin.create_database("shop")
        conn.admin.create_table(PATH, lakelog.TableDescriptor(V1, 1, {"table.log.tiered.local-segments": "1"}))
        table = conn.get_table(PATH)
        old_writer = table.new_append().create_writer()
        for first in range(0, 20_000, 5_000):  # several segments: the oldest go to remote storage
            old_writer.append_arrow(rows(first, 5_000, amount=False))
        old_writer.flush()
        assert conn.admin.alter_table(PATH, ALTER) == 2
        old_writer.append_arrow(rows(20_000, 100, amount=False))  # opened before the change: its schema still
        old_writer.close()
        table = conn.get_table(PATH)
        assert table.info.schema_id == 2 and table.info.schema.names == ["id", "name", "dt", "amount"]
        with table.new_append().create_writer() as writer:
            writer.append_arrow(rows(20_100, 5_000, amount=True))
            writer.append({"id": 2**40, "name": "past int32", "dt": "d", "amount": 1.5})
        wait_for_remote(conn, PATH)
        total = 25_101
        assert read_all(table, total) == [*expected(25_100, 20_100), {"id": 2**40, "name": "past int32", "dt": "d", "amount": 1.5}]
        assert [row["amount"] for row in read_all(table, total, ["amount"])] == [r["amount"] for r in expected(25_100, 20_100)] + [1.5]
        assert read_all(table, total, ["amount", "id"])[:-1] == [{"amount": r["amount"], "id": r["id"]} for r in expected(25_100, 20_100)]
        scanner = table.new_scan().create_log_scanner()
        scanner.subscribe(0, 19_999)
        polled = [record.row for record in scanner.poll(timeout_ms=5000)]
        assert polled[0] == {"id": 19_999, "name": "n19999", "dt": "d", "amount": None}


def test_a_refused_change_leaves_the_table_as_it_was(conn: lakelog.Connection) -> None:
    conn.admin.create_database("shop")
    conn.admin.create_table(PATH, lakelog.TableDescriptor(V1, 1))
    before = conn.admin.get_table_info(PATH)
    with pytest.raises(InvalidAlterTableError, match="column 'id' is int32 and cannot become double"):
        conn.admin.alter_table(PATH, [TableChange.add_column("amount", pa.float64()), TableChange.widen_column("id", pa.float64())])
    assert conn.admin.get_table_info(PATH) == before
    with pytest.raises(SchemaNotExistError, match="has no schema 2"):
        conn.admin.get_table_schema(PATH, 2)


def test_a_batch_of_a_schema_id_the_table_never_had_is_refused(server: ServerProcess, conn: lakelog.Connection) -> None:
    conn.admin.create_database("shop")
    conn.admin.create_table(PATH, lakelog.TableDescriptor(V1, 1))
    table = conn.get_table(PATH)
    produce = grpc.insecure_channel(server.address).unary_unary(
        "/lakelog.rpc.TabletService/ProduceLog", response_deserializer=pb.ProduceLogResponse.FromString
    )
    batch = encode_batch(rows(0, 3, amount=False), schema_id=7)
    answer = produce(encode_produce_request(ProduceRequest(table.info.table_id, [ProduceBucket(0, [batch])], 10_000)), timeout=30).buckets_resp[0]
    assert answer.error_code == SchemaMismatchError.code
    assert "batch has schema id 7; the table's are 1..1" in answer.error_message


def test_the_schema_history_survives_a_restart_and_the_cli_alters_and_describes(
    server_factory: Callable[..., ServerProcess], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        conn.admin.create_database("shop")
        conn.admin.create_table(PATH, lakelog.TableDescriptor(V1, 1))
        with conn.get_table(PATH).new_append().create_writer() as writer:
            writer.append_arrow(rows(0, 10, amount=False))
    assert main(["table", "alter", "shop.events", "--widen-column", "id:int64", "--add-column", "amount:float64", "--bootstrap", server.address]) == 0
    assert "altered table shop.events: schema 2" in capsys.readouterr().out
    server.stop(0)
    again = server_factory(tmp_path / "data")
    with lakelog.connect(again.address) as conn:
        assert conn.admin.get_table_schema(PATH, 1).schema.equals(V1)
        assert conn.admin.get_table_schema(PATH).schema_id == 2
        table = conn.get_table(PATH)
        with table.new_append().create_writer() as writer:
            writer.append_arrow(rows(10, 10, amount=True))
        assert read_all(table, 20) == expected(20, 10)
    capsys.readouterr()
    assert main(["scan", "shop.events", "--columns", "id,amount", "--output", "jsonl", "--bootstrap", again.address]) == 0
    scanned = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["id"], r["amount"]) for r in scanned] == [(r["id"], r["amount"]) for r in expected(20, 10)]
    assert main(["table", "describe", "shop.events", "--bootstrap", again.address]) == 0
    described = capsys.readouterr().out
    assert "schema (id 2)" in described and "1: id:int32,name:string,dt:string" in described
    assert main(["table", "alter", "shop.events", "--widen-column", "name:int64", "--bootstrap", again.address]) != 0
    assert "column 'name' is string and cannot become int64" in capsys.readouterr().err


def test_the_lake_follows_a_change_and_one_scan_reads_every_tier_in_the_newest_schema(
    server_factory: Callable[..., ServerProcess], spark: Any
) -> None:
    """Tiered before and after the change: the lake table gains the column and the wider type (plain
    PyIceberg reads it so), files written before read null in it, and one scan from offset 0 reads
    the lake, remote and local tiers in the newest schema, through either LogSource; so does
    Spark's ``format("lakelog")``."""
    server = server_factory(**TIERED_SERVER)
    with lakelog.connect(server.address, {"client.lake.source": "iceberg-arrow"}) as conn:
        conn.admin.create_database("shop")
        conn.admin.create_table(PATH, lakelog.TableDescriptor(V1, 1, TIERED_TABLE))
        old_writer = conn.get_table(PATH).new_append().create_writer()
        for first in range(0, 10_000, 1_000):
            old_writer.append_arrow(rows(first, 1_000, amount=False))
        old_writer.flush()
        assert run_tier(server.address, "--table", str(PATH)).returncode == 0
        conn.admin.alter_table(PATH, ALTER)
        old_writer.append_arrow(rows(10_000, 100, amount=False))
        old_writer.close()
        table = conn.get_table(PATH)
        with table.new_append().create_writer() as writer:
            for first in range(10_100, 15_100, 1_000):
                writer.append_arrow(rows(first, 1_000, amount=True))
        tiered = run_tier(server.address, "--table", str(PATH))
        assert tiered.returncode == 0, tiered.stderr[-3000:]
        with table.new_append().create_writer() as writer:
            writer.append_arrow(rows(15_100, 200, amount=True))
        assert server.tablet is not None
        expire_remote(server.tablet.remote)
        total = 15_300
        lake = lake_table(server, PATH).scan().to_arrow().sort_by("__offset")
        assert lake.schema.field("id").type == pa.int64() and "amount" in lake.schema.names
        assert lake.select(["id", "amount"]).to_pylist() == [{"id": r["id"], "amount": r["amount"]} for r in expected(lake.num_rows, 10_100)]
        scanner = table.new_scan().create_log_scanner()
        scanner.subscribe_from_beginning()
        got = scan_all(scanner, total).sort_by("__offset").select(["id", "name", "dt", "amount"])
        assert got.to_pylist() == expected(total, 10_100)
        assert scanner.records_by_tier().get("lake", 0) > 0
    with lakelog.connect(server.address, {"client.lake.source": "iceberg", "lake.spark.master": "local[2]"}) as conn:
        scanner = conn.get_table(PATH).new_scan().project(["amount", "id"]).create_log_scanner()
        scanner.subscribe_from_beginning()
        got = scan_all(scanner, total).sort_by("__offset").select(["amount", "id"])
        assert got.to_pylist() == [{"amount": r["amount"], "id": r["id"]} for r in expected(total, 10_100)]
        assert scanner.records_by_tier().get("lake", 0) > 0
    lakelog.spark.register(spark)
    frame = spark.read.format("lakelog").option("bootstrap", server.address).option("table", str(PATH)).load()
    assert frame.schema["id"].dataType.simpleString() == "bigint" and "amount" in frame.columns
    read = sorted((row["id"], row["amount"]) for row in frame.select("id", "amount").collect())
    assert read == [(r["id"], r["amount"]) for r in expected(total, 10_100)]
