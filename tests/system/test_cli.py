"""The data commands of the CLI (`table`, `produce`, `scan`, `offsets`) against a real server.

Most tests call ``main([...])`` in-process (fast, capsys captures the output); the subprocess tests
prove that ``python -m lakelog`` works as a user runs it, including ``LAKELOG_BOOTSTRAP`` and stdin.
"""

from __future__ import annotations

import base64
import csv
import importlib.metadata
import io
import json
import os
import re
import subprocess
import sys
import time
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.cli.main import main
from lakelog.cli.schema_text import format_schema, parse_schema
from lakelog.cli.tier_bars import BAR_WIDTH
from lakelog.errors import InvalidTableError
from lakelog.metadata import LakeBucketOffset, LakeSnapshot
from lakelog.server.server_process import ServerProcess
from tests.harness.lake_tier import LAKE_TABLE
from tests.harness.tables import create_table, produce_orders

RICH_SCHEMA_TEXT = (
    "id:int64 not null,name:string,amount:decimal(10,2),price:float64,qty:int32,"
    "ok:bool,day:date32,ts:timestamp[ms, tz=UTC],raw:binary"
)
RICH_SCHEMA = parse_schema(RICH_SCHEMA_TEXT)
EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess({"data.dir": str(tmp_path_factory.mktemp("cli-data")), "server.port": 0}) as process:
        yield process


class Cli:
    """Runs ``main`` in-process against the test server; returns (exit code, stdout, stderr)."""

    def __init__(self, server: ServerProcess, capsys: pytest.CaptureFixture[str]) -> None:
        self.address = server.address
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([*argv] if argv[0] == "config" else [*argv, "--bootstrap", self.address])
        out, err = self.capsys.readouterr()
        return code, out, err

    def ok(self, *argv: str) -> str:
        code, out, err = self(*argv)
        assert code == 0, err
        return out

    def jsonl(self, *argv: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.ok("scan", *argv, "--output", "jsonl").splitlines()]

    def json(self, *argv: str) -> Any:
        return json.loads(self.ok(*argv, "--output", "json"))

    def offsets(self, *argv: str) -> dict[int, int]:
        return {item["bucket"]: item["offset"] for item in self.json("offsets", *argv)}


@pytest.fixture
def cli(server: ServerProcess, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(server, capsys)


def rich_row(i: int) -> dict[str, Any]:
    """Row ``i`` as Python values; every tenth row has nulls where the schema allows them."""
    blank = i % 10 == 0
    return {
        "id": i,
        "name": f"name-{i}",
        "amount": None if blank else Decimal(f"{i}.{i % 100:02d}"),
        "price": None if blank else i * 0.25,
        "qty": None if blank else i % 7 - 3,
        "ok": None if blank else i % 2 == 0,
        "day": None if blank else date(2024, 1, 1) + timedelta(days=i),
        "ts": None if blank else EPOCH + timedelta(seconds=i, milliseconds=i % 1000),
        "raw": None if blank else f"r{i}".encode(),
    }


def expected_json(i: int) -> dict[str, Any]:
    """What ``scan --output jsonl`` must print for row ``i`` (ISO times, exact decimals, base64)."""
    row = rich_row(i)
    return {
        **row,
        "amount": None if row["amount"] is None else str(row["amount"]),
        "day": None if row["day"] is None else row["day"].isoformat(),
        "ts": None if row["ts"] is None else row["ts"].isoformat(),
        "raw": None if row["raw"] is None else base64.b64encode(row["raw"]).decode(),
    }


def write_csv(path: Path, ids: range) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(RICH_SCHEMA.names)
        for i in ids:
            row = rich_row(i)
            cells = {**row, "ts": row["ts"].isoformat() if row["ts"] else None, "raw": row["raw"].decode() if row["raw"] else None}
            writer.writerow(["" if cells[name] is None else cells[name] for name in RICH_SCHEMA.names])


def write_jsonl(path: Path, ids: range) -> None:
    path.write_text("".join(json.dumps(expected_json(i)) + "\n" for i in ids))


def write_parquet(path: Path, ids: range) -> None:
    table = pa.Table.from_pylist([rich_row(i) for i in ids], schema=RICH_SCHEMA)
    pq.write_table(table, path, row_group_size=64)


def check_records(records: list[dict[str, Any]], ids: set[int]) -> None:
    """Every id exactly once and every value exactly as produced."""
    assert sorted(r["id"] for r in records) == sorted(ids)
    for record in records:
        columns = {key: value for key, value in record.items() if not key.startswith("__")}
        assert isinstance(record["__timestamp"], int) and record["__timestamp"] > 0
        assert columns == expected_json(record["id"])


def offsets_by_bucket(records: list[dict[str, Any]]) -> dict[int, list[int]]:
    result: dict[int, list[int]] = {}
    for record in records:
        result.setdefault(record["__bucket"], []).append(record["__offset"])
    return result


def test_schema_text_round_trip_and_errors() -> None:
    schema = parse_schema(RICH_SCHEMA_TEXT + ",big:decimal(50,3),t:timestamp[us],z:TIMESTAMP[ms, tz=Europe/Paris],x:int,s:int8")
    assert schema.field("id").nullable is False
    assert schema.field("amount").type == pa.decimal128(10, 2)
    assert schema.field("big").type == pa.decimal256(50, 3)
    assert schema.field("z").type == pa.timestamp("ms", tz="Europe/Paris")
    assert schema.field("x").type == pa.int32()
    assert parse_schema(format_schema(schema)) == schema
    with pytest.raises(InvalidTableError, match="unknown type 'varchar' for column 'name'"):
        parse_schema("id:int64,name:varchar")
    with pytest.raises(InvalidTableError, match="not NAME:TYPE"):
        parse_schema("id")


def test_create_produce_all_formats_and_scan_back(cli: Cli, tmp_path: Path) -> None:
    out = cli.ok("table", "create", "shop.rich", "--schema", RICH_SCHEMA_TEXT, "--buckets", "3", "--property", "table.log.ttl=7d")
    assert "created table shop.rich" in out
    write_csv(tmp_path / "a.csv", range(0, 300))
    write_jsonl(tmp_path / "b.jsonl", range(300, 500))
    write_parquet(tmp_path / "c.parquet", range(500, 750))

    assert cli.ok("produce", "shop.rich", "--file", str(tmp_path / "a.csv")).strip() == "produced 300 records to shop.rich"
    assert "produced 200 records" in cli.ok("produce", "shop.rich", "--file", str(tmp_path / "b.jsonl"), "--batch-rows", "64")
    assert "produced 250 records" in cli.ok("produce", "shop.rich", "--file", str(tmp_path / "c.parquet"), "--batch-rows", "50")

    records = cli.jsonl("shop.rich")
    offsets = offsets_by_bucket(records)
    assert set(offsets) <= {0, 1, 2}
    for bucket, seen in offsets.items():
        assert seen == list(range(len(seen))), f"bucket {bucket} offsets not contiguous"
    check_records(records, set(range(750)))

    assert cli.offsets("shop.rich") == {b: len(offsets.get(b, [])) for b in range(3)}
    assert cli.offsets("shop.rich", "--earliest", "--bucket", "1") == {1: 0}
    labelled = cli.ok("offsets", "shop.rich", "--earliest", "--bucket", "1").splitlines()
    assert labelled[0].split() == ["bucket", "earliest", "offset"] and labelled[2].split() == ["1", "0"]


def test_produce_stdin_and_scan_options(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli.ok("table", "create", "shop.opts", "--schema", RICH_SCHEMA_TEXT)
    write_jsonl(tmp_path / "first.jsonl", range(0, 20))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((tmp_path / "first.jsonl").read_bytes())))
    assert "produced 20 records" in cli.ok("produce", "shop.opts", "--file", "-", "--format", "jsonl")
    first = cli.jsonl("shop.opts")
    time.sleep(0.05)  # the second produce gets a later commit timestamp
    write_csv(tmp_path / "second.csv", range(20, 30))
    cli.ok("produce", "shop.opts", "--file", str(tmp_path / "second.csv"))

    projected = cli.jsonl("shop.opts", "--columns", "name,id")
    assert [list(r) for r in projected[:1]] == [["__bucket", "__offset", "__timestamp", "name", "id"]]
    assert [(r["id"], r["name"]) for r in projected] == [(i, f"name-{i}") for i in range(30)]

    from_offset = cli.jsonl("shop.opts", "--offset", "25", "--bucket", "0")
    assert [r["__offset"] for r in from_offset] == [25, 26, 27, 28, 29]
    assert [r["id"] for r in from_offset] == [25, 26, 27, 28, 29]

    after_first = max(r["__timestamp"] for r in first) + 1
    assert [r["id"] for r in cli.jsonl("shop.opts", "--timestamp", str(after_first))] == list(range(20, 30))
    assert cli.offsets("shop.opts", "--timestamp", str(after_first)) == {0: 20}
    assert cli.offsets("shop.opts", "--latest") == {0: 30}
    assert cli.offsets("shop.opts", "--timestamp", "2000-01-01T00:00:00Z") == {0: 0}

    limited = cli.jsonl("shop.opts", "--max-records", "7")
    assert [r["__offset"] for r in limited] == list(range(7))

    table = cli.ok("scan", "shop.opts", "--columns", "id,name,ok", "--max-records", "3").splitlines()
    assert table[0].split() == ["__bucket", "__offset", "__timestamp", "id", "name", "ok"]
    assert table[2].split()[3:] == ["0", "name-0", "null"] and table[3].split()[3:] == ["1", "name-1", "false"]
    assert len({line.index("name-") for line in table[2:]}) == 1, "columns are aligned"


def test_describe_list_and_drop(cli: Cli) -> None:
    cli.ok("table", "create", "inventory.items", "--schema", "sku:string not null,count:int32", "--buckets", "2", "--property", "owner=ops")
    code, _, err = cli("table", "create", "inventory.items", "--schema", "sku:string")
    assert code == 1 and "TableAlreadyExistError" in err
    cli.ok("table", "create", "inventory.items", "--schema", "sku:string", "--if-not-exists")

    described = cli.ok("table", "describe", "inventory.items")
    assert "inventory.items" in described and "buckets:    2" in described
    assert any(line.split() == ["sku", "string", "no"] for line in described.splitlines())
    assert "owner = ops" in described
    bucket_section, tiers_section = described.split("\nbuckets (")[1].split("\n\ntiers (")
    bucket_rows = [line.split() for line in bucket_section.splitlines()[3:]]
    empty_tiers = ["0", "0", "—", "—", "—", "—"]
    one_copy = ["0", "0", "0"]  # replicas, ISR: server 0 alone; leader epoch 0
    assert bucket_rows == [["0", "0", *empty_tiers, *one_copy], ["1", "0", *empty_tiers, *one_copy]], "an empty tier is —"
    assert [line.split("|")[1:] for line in tiers_section.splitlines()[1:]] == [[" " * BAR_WIDTH, "  —"]] * 6, "empty lanes"

    assert "inventory.items" in cli.ok("table", "list").splitlines()
    assert cli.ok("table", "list", "inventory").splitlines() == ["inventory.items"]
    assert cli.ok("table", "drop", "inventory.items").strip() == "dropped table inventory.items"
    assert cli.ok("table", "list", "inventory").splitlines() == []


def test_describe_draws_each_buckets_tiers_to_scale(server_factory: Callable[..., ServerProcess], capsys: pytest.CaptureFixture[str]) -> None:
    """The status page's bars in the terminal: a lane per tier, BAR_WIDTH columns for offsets
    [0, high watermark), each within a column of its tier's offsets, labelled with them."""
    server = server_factory(**{"log.segment.max-bytes": "64kb", "remote.log.task-interval": "1h"})
    assert server.tablet is not None
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, "bars", properties={**LAKE_TABLE, "table.log.tiered.local-segments": "1"})
        # A request per 2,000 records: a segment rolls between appends, not inside one, so batches the
        # sender gathered into one request would share one segment, and the last one is never uploaded.
        for first in range(0, 8000, 2000):
            produce_orders(table, first, 2000)
        assert server.tablet.remote.run_once().uploaded > 0
        conn.internal_admin.commit_lake_snapshot(table.path, LakeSnapshot(1, {0: LakeBucketOffset(0, 4000, 1)}))
        info = conn.admin.describe_buckets(table.path)[0]
    assert info.high_watermark == 8000 and 0 < info.local_log_start_offset <= info.remote_log_end_offset < 8000

    described = Cli(server, capsys).ok("table", "describe", "shop.bars")
    legend, *lanes = described.split("\ntiers (")[1].splitlines()
    assert legend == "each bar spans offsets 0 to the bucket's high watermark; ~ lake, # remote, = local):"
    (lake_name, lake, lake_label), (remote_name, remote, remote_label), (local_name, local, local_label) = (
        lane.split("|") for lane in lanes
    )
    assert (lake_name.split(), remote_name.split(), local_name.split()) == (["bucket", "0", "lake"], ["remote"], ["local"])
    assert lake == "~" * (BAR_WIDTH // 2) + " " * (BAR_WIDTH // 2) and lake_label.strip() == "0 – 4,000"
    column = 8000 / BAR_WIDTH
    assert re.fullmatch(r"#+ +", remote) and abs(remote.count("#") - info.remote_log_end_offset / column) <= 1
    assert remote_label.strip() == f"0 – {info.remote_log_end_offset:,}"
    assert re.fullmatch(r" +=+", local) and abs(local.count(" ") - info.local_log_start_offset / column) <= 1
    assert local_label.strip() == f"{info.local_log_start_offset:,} – 8,000"


def _scan_to_file(server: ServerProcess, path: Path, *argv: str) -> None:
    with path.open("wb") as out:
        env = {**os.environ, "LAKELOG_BOOTSTRAP": server.address}
        done = subprocess.run([sys.executable, "-m", "lakelog", "scan", *argv], env=env, stdout=out, stderr=subprocess.PIPE, timeout=120)
    assert done.returncode == 0, done.stderr.decode()


def test_scan_to_csv_parquet_and_arrow_holds_every_record_and_produces_back(cli: Cli, server: ServerProcess, tmp_path: Path) -> None:
    cli.ok("table", "create", "shop.outputs", "--schema", RICH_SCHEMA_TEXT, "--buckets", "2")
    write_parquet(tmp_path / "in.parquet", range(300))
    cli.ok("produce", "shop.outputs", "--file", str(tmp_path / "in.parquet"), "--batch-rows", "70")
    scanned = sorted(cli.jsonl("shop.outputs"), key=lambda r: r["id"])
    check_records(scanned, set(range(300)))
    meta = [(r["__bucket"], r["__offset"], r["__timestamp"]) for r in scanned]

    _scan_to_file(server, tmp_path / "out.parquet", "shop.outputs", "--output", "parquet")
    _scan_to_file(server, tmp_path / "out.arrows", "shop.outputs", "--output", "arrow")
    with pa.ipc.open_stream(tmp_path / "out.arrows") as stream:
        streamed = stream.read_all()
    for table in (pq.read_table(tmp_path / "out.parquet"), streamed):
        assert table.schema.names == ["__bucket", "__offset", "__timestamp", *RICH_SCHEMA.names]
        table = table.sort_by("id")
        assert table.select(RICH_SCHEMA.names).cast(RICH_SCHEMA).to_pylist() == [rich_row(i) for i in range(300)]
        assert list(zip(*(table.column(name).to_pylist() for name in ("__bucket", "__offset", "__timestamp")))) == meta

    _scan_to_file(server, tmp_path / "out.csv", "shop.outputs", "--output", "csv")
    with (tmp_path / "out.csv").open(newline="") as handle:
        header = next(csv.reader(handle))
    assert header == ["__bucket", "__offset", "__timestamp", *RICH_SCHEMA.names]
    # What scan writes, produce reads back: both files into a new table give the same records.
    cli.ok("table", "create", "shop.again", "--schema", RICH_SCHEMA_TEXT)
    cli.ok("produce", "shop.again", "--file", str(tmp_path / "out.csv"))
    cli.ok("produce", "shop.again", "--file", str(tmp_path / "out.parquet"))
    again = [{k: v for k, v in r.items() if not k.startswith("__")} for r in cli.jsonl("shop.again")]
    assert sorted(again, key=lambda r: r["id"]) == sorted([expected_json(i) for i in range(300)] * 2, key=lambda r: r["id"])


def test_scan_jsonl_spells_awkward_values_as_json(cli: Cli, server: ServerProcess, tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("text", pa.string()), ("note", pa.string()), ("ratio", pa.float64()), ("tags", pa.list_(pa.string()))])
    with lakelog.connect(server.address) as conn:  # the schema text has no nested types; the API has
        conn.admin.create_database("shop", ignore_if_exists=True)
        conn.admin.create_table(lakelog.TablePath("shop", "awkward"), lakelog.TableDescriptor(schema, 1, {}))
    texts = ['say "hi"', "back\\slash", "ünïcødé ✓", "", None, "{plain}"]
    notes = ["line\nbreak\ttab", "bell\x07", None, 'q"', "", "x"]  # control characters
    ratios = [2.0, float("nan"), float("inf"), -0.5, 1e300, None]
    rows = pa.table({"id": range(6), "text": texts, "note": notes, "ratio": ratios, "tags": [["a", 'b"'], [], None, ["x"], ["\n"], ["z"]]}, schema=schema)
    pq.write_table(rows, tmp_path / "awkward.parquet")
    cli.ok("produce", "shop.awkward", "--file", str(tmp_path / "awkward.parquet"))

    records = cli.jsonl("shop.awkward")

    assert [r["text"] for r in records] == texts
    assert [r["note"] for r in records] == notes
    assert [r["ratio"] for r in records] == [2.0, None, None, -0.5, 1e300, None], "JSON has no NaN or infinity"
    assert isinstance(records[0]["ratio"], float), "a whole float stays a float"
    assert [r["tags"] for r in records] == [["a", 'b"'], [], None, ["x"], ["\n"], ["z"]]
    code, _, err = cli("scan", "shop.awkward", "--output", "csv")
    assert code == 1 and "nested column(s) ['tags']" in err


def test_errors_exit_1_with_a_clear_message(cli: Cli, tmp_path: Path) -> None:
    code, out, err = cli("table", "create", "shop.bad", "--schema", "id:int64,name:varchar(10)")
    assert code == 1 and out == ""
    assert err.strip().startswith("lakelog: InvalidTableError: unknown type 'varchar(10)' for column 'name'")

    for argv in (("scan", "shop.nope"), ("offsets", "shop.nope"), ("table", "describe", "shop.nope"), ("table", "drop", "shop.nope")):
        code, _, err = cli(*argv)
        assert code == 1 and "TableNotExistError" in err and "shop.nope" in err, argv

    code, _, err = cli("scan", "bad name.x")
    assert code == 1 and "InvalidNameError" in err

    cli.ok("table", "create", "shop.strict", "--schema", "id:int64,amount:float64")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "amount": 2.5}\n{"id": 2.5, "amount": 1}\n')
    code, _, err = cli("produce", "shop.strict", "--file", str(bad))
    assert code == 1 and "line 2" in err and "'id'" in err
    extra = tmp_path / "extra.csv"
    extra.write_text("id,amount,colour\n1,2.0,red\n")
    code, _, err = cli("produce", "shop.strict", "--file", str(extra))
    assert code == 1 and "colour" in err
    code, _, err = cli("produce", "shop.strict", "--file", str(tmp_path / "missing.csv"))
    assert code == 1 and "no such file" in err
    code, _, err = cli("produce", "shop.strict", "--file", str(tmp_path / "data.txt"))
    assert code == 1 and "--format" in err
    code, _, err = cli("scan", "shop.strict", "--bucket", "5")
    assert code == 1 and "UnknownBucketError" in err


def _lakelog(server: ServerProcess, *argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAKELOG_BOOTSTRAP": server.address}
    return subprocess.run([sys.executable, "-m", "lakelog", *argv], env=env, capture_output=True, text=True, timeout=120, **kwargs)


def test_python_m_lakelog_subprocess(server: ServerProcess) -> None:
    created = _lakelog(server, "table", "create", "sub.events", "--schema", "id:int64,msg:string", "--buckets", "2")
    assert created.returncode == 0, created.stderr
    produced = _lakelog(server, "produce", "sub.events", "--file", "-", "--format", "csv", input='id,msg\n1,hello\n2,world\n3,""\n4,\n')
    assert produced.returncode == 0 and produced.stdout.strip() == "produced 4 records to sub.events", produced.stderr
    scanned = _lakelog(server, "scan", "sub.events", "--output", "jsonl")
    assert scanned.returncode == 0, scanned.stderr
    rows = [json.loads(line) for line in scanned.stdout.splitlines()]
    # as in PostgreSQL's CSV: a quoted "" is an empty string, an empty field is null
    assert sorted((r["id"], r["msg"]) for r in rows) == [(1, "hello"), (2, "world"), (3, ""), (4, None)]

    failed = _lakelog(server, "scan", "sub.nope")
    assert failed.returncode == 1 and failed.stdout == ""
    assert failed.stderr.strip() == "lakelog: TableNotExistError: table sub.nope does not exist"


def test_scan_follow_sees_records_produced_after_it_started(server: ServerProcess, tmp_path: Path) -> None:
    assert _lakelog(server, "table", "create", "sub.live", "--schema", "id:int64").returncode == 0
    env = {**os.environ, "LAKELOG_BOOTSTRAP": server.address}
    follower = subprocess.Popen(
        [sys.executable, "-m", "lakelog", "scan", "sub.live", "--follow", "--max-records", "3", "--output", "jsonl", "--timeout-ms", "200"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        time.sleep(2)  # the follower is subscribed to an empty table by now
        (tmp_path / "live.jsonl").write_text('{"id": 1}\n{"id": 2}\n{"id": 3}\n')
        assert _lakelog(server, "produce", "sub.live", "--file", str(tmp_path / "live.jsonl")).returncode == 0
        out, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    assert [json.loads(line)["id"] for line in out.splitlines()] == [1, 2, 3]


def test_version() -> None:
    expected = f"lakelog {importlib.metadata.version('lakelog')}"
    assert lakelog.__version__ == importlib.metadata.version("lakelog")
    printed = subprocess.run([sys.executable, "-m", "lakelog", "--version"], capture_output=True, text=True, timeout=60)
    assert (printed.returncode, printed.stdout.strip()) == (0, expected)


def test_read_commands_print_json_for_scripts(cli: Cli) -> None:
    cli.ok("table", "create", "json.items", "--schema", "sku:string not null,count:int32", "--buckets", "2", "--comment", "stock")
    described = cli.json("table", "describe", "json.items")
    assert {key: described[key] for key in ("table", "buckets", "lake_enabled", "comment")} == {
        "table": "json.items", "buckets": 2, "lake_enabled": False, "comment": "stock",
    }
    assert described["schema"] == [{"name": "sku", "type": "string", "nullable": False}, {"name": "count", "type": "int32", "nullable": True}]
    assert [b["bucket"] for b in described["bucket_info"]] == [0, 1]
    assert described["bucket_info"][0]["remote_log_start_offset"] is None, "an empty tier is null"
    assert described["bucket_info"][0]["high_watermark"] == 0
    assert cli.json("table", "list", "json") == ["json.items"]
    assert cli.offsets("json.items") == {0: 0, 1: 0}

    config = cli.json("config")
    segment = next(key for key in config["keys"] if key["key"] == "log.segment.max-bytes")
    assert (segment["default"], segment["default_text"]) == (256 << 20, "256mb")
    assert "datalake.iceberg." in [item["prefix"] for item in config["pass_through"]]


def test_config_prints_values_as_they_are_written(cli: Cli) -> None:
    lines = {line.split()[0]: line.split()[1] for line in cli.ok("config").splitlines()}
    assert (lines["log.segment.max-bytes"], lines["log.segment.max-age"], lines["client.writer.linger"]) == ("256mb", "7d", "100ms")


def test_counts_are_pluralised(cli: Cli, tmp_path: Path) -> None:
    assert cli.ok("table", "create", "words.one", "--schema", "id:int64").strip().endswith(", 1 bucket)")
    (tmp_path / "one.csv").write_text("id\n7\n")
    assert cli.ok("produce", "words.one", "--file", str(tmp_path / "one.csv")).strip() == "produced 1 record to words.one"


def test_csv_errors_name_the_line_and_column_with_a_hint(cli: Cli, tmp_path: Path) -> None:
    cli.ok("table", "create", "csv.orders", "--schema", "id:int64,name:string,amount:float64")
    cases = {
        "id,name,amount\n1,a,1.5\n2,b,lots\n": "bad.csv line 3, column 'amount': 'lots' is not a double",
        "id,name,amount\n1,a,1.5\n2,b\n": "short.csv line 3: expected 3 columns, got 2 ('2,b'); if its fields are not separated by ',', pass --delimiter",
        "10,a,1.5\n": "headless.csv line 1: the header row names column(s) ['10', 'a', '1.5'] that are not in the table",
        "id;name;amount\n1;a;1.5\n": "the first line must be a header row naming the columns, and if its fields are not separated by ',', pass --delimiter",
    }
    for (content, message), name in zip(cases.items(), ("bad", "short", "headless", "semicolons")):
        (tmp_path / f"{name}.csv").write_text(content)
        code, _, err = cli("produce", "csv.orders", "--file", str(tmp_path / f"{name}.csv"))
        assert code == 1 and message in err.splitlines()[-1], err
    assert cli.ok("produce", "csv.orders", "--file", str(tmp_path / "semicolons.csv"), "--delimiter", ";").strip() == "produced 1 record to csv.orders"
    assert cli.offsets("csv.orders") == {0: 1}, "only the file with the right delimiter was produced"


def test_default_config_file_from_the_environment(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "client.yaml"
    config.write_text("client.request-timeout: 20s\n")
    monkeypatch.setenv("LAKELOG_CONFIG", str(config))
    cli.ok("table", "list")
    config.write_text("client.request-timeout: soon\n")
    code, _, err = cli("table", "list")
    assert code == 1 and "client.request-timeout" in err and "InvalidConfigError" in err
    assert cli("table", "list", "--config", str(tmp_path / "none.yaml"))[0] == 1, "--config beats the environment"


def test_log_level_flag(server: ServerProcess) -> None:
    quiet = _lakelog(server, "--log-level", "error", "table", "list")
    assert quiet.returncode == 0 and quiet.stderr == ""
    wrong = _lakelog(server, "--log-level", "chatty", "table", "list")
    assert wrong.returncode == 2 and "--log-level" in wrong.stderr


def test_a_closed_pipe_ends_quietly(server: ServerProcess) -> None:
    """`lakelog config | head -1`: the reader left before lakelog wrote; no traceback, exit 0."""
    _lakelog(server, "table", "create", "pipe.items", "--schema", "id:int64", "--buckets", "64")
    env = {**os.environ, "LAKELOG_BOOTSTRAP": server.address}
    for argv in (["config"], ["table", "describe", "pipe.items"], ["offsets", "pipe.items"]):
        read_end, write_end = os.pipe()
        os.close(read_end)  # closed before lakelog writes: its first write fails
        try:
            done = subprocess.run([sys.executable, "-m", "lakelog", *argv], stdout=write_end, stderr=subprocess.PIPE, text=True, env=env, timeout=60)
        finally:
            os.close(write_end)
        assert (done.returncode, done.stderr) == (0, ""), argv


def test_shell_completion(tmp_path: Path) -> None:
    completions = tmp_path / "completions"
    env = {**os.environ, "_ARGCOMPLETE": "1", "COMP_LINE": "lakelog ta", "COMP_POINT": "10", "_ARGCOMPLETE_STDOUT_FILENAME": str(completions)}
    done = subprocess.run([Path(sys.executable).with_name("lakelog")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(completions.read_text().split()) == ["table", "tablet-server"]
    env.update(COMP_LINE="lakelog table d", COMP_POINT="15")
    subprocess.run([Path(sys.executable).with_name("lakelog")], env=env, capture_output=True, text=True, timeout=60)
    assert sorted(completions.read_text().split()) == ["describe", "drop"]


def test_tier_table_flag_does_not_swallow_the_action() -> None:
    from lakelog.cli.main import build_parser

    args = build_parser().parse_args(["tier", "--table", "shop.orders", "status", "--table", "shop.items"])
    assert (args.action, args.table) == ("status", ["shop.orders", "shop.items"])


def test_produce_treats_a_missing_column_as_append_arrow_does(cli: Cli, tmp_path: Path) -> None:
    cli.ok("table", "create", "shop.partial", "--schema", "id:int64 not null,amount:float64,note:string")
    partial = tmp_path / "partial.csv"
    partial.write_text("id,amount\n1,2.5\n")
    assert cli.ok("produce", "shop.partial", "--file", str(partial)) == "produced 1 record to shop.partial\n"
    assert [{k: row[k] for k in ("id", "amount", "note")} for row in cli.jsonl("shop.partial")] == [{"id": 1, "amount": 2.5, "note": None}]
    no_id = tmp_path / "no_id.csv"
    no_id.write_text("amount\n2.5\n")
    code, _, err = cli("produce", "shop.partial", "--file", str(no_id))
    assert code == 1 and "missing, and the table requires (not null): ['id']" in err, err
    assert cli.offsets("shop.partial") == {0: 1}, "nothing of the refused file was written"


def test_tier_status_without_a_job_says_so(cli: Cli) -> None:
    assert cli.ok("tier", "status") == "no tiering job has reported yet (`lakelog tier` runs one)\n"
