"""Corrupt and truncated files the tests elsewhere do not cover: a local index, a remote manifest, a
lake data file. Each is reported naming the file (and the offsets at stake) or repaired, and nothing
else breaks: other buckets and tiers keep serving exact records.

(A flipped byte in a local segment: tests/system/test_durability.py; a torn local tail: the same; a flipped
or truncated remote segment: tests/integration/test_remote_client.py.)
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import lakelog
from lakelog.errors import LakeDataError, RemoteStorageError
from lakelog.record.batch import iter_headers
from tests.harness.lake_tier import LAKE_TABLE, expire_remote
from tests.harness.remote_tier import BASE_CONF, fetch, produce, remote_manager
from tests.harness.tables import create_table, scan_all


def read_bucket(conn: lakelog.Connection, table: lakelog.Table, bucket: int, start: int = 0) -> list[int]:
    total = conn.admin.list_offsets(table.path, [bucket])[bucket] - start
    with table.new_scan().create_log_scanner() as scanner:
        scanner.subscribe(bucket, start)
        return scan_all(scanner, total).column("__offset").to_pylist()


def test_corrupt_local_index_is_rebuilt_and_reads_stay_exact(server_factory, tmp_path: Path, caplog) -> None:
    data_dir = tmp_path / "data"
    server = server_factory(data_dir, **{"log.segment.max-bytes": "16kb"})
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, buckets=2)
        produce(table, 80)
    server.stop()
    # (base offset, commit timestamp) of every batch of bucket 0, read from its segment files.
    batches = [
        (header.base_offset, header.commit_timestamp)
        for segment in sorted((data_dir / "tablet-server" / "log").glob("*/0/*.log"))
        for _, header in iter_headers(segment.read_bytes())
    ]
    assert len(batches) >= 20 and len({ts for _, ts in batches}) == len(batches), "batches with distinct timestamps"
    index = sorted((data_dir / "tablet-server" / "log").glob("*/0/*.index"))[1]
    data = bytearray(index.read_bytes())
    data[8:16] = b"\xff" * 8
    index.write_bytes(bytes(data))
    truncated = sorted((data_dir / "tablet-server" / "log").glob("*/0/*.timeindex"))[2]
    truncated.write_bytes(truncated.read_bytes()[:5])

    with caplog.at_level(logging.WARNING):
        restarted = server_factory(data_dir, **{"log.segment.max-bytes": "16kb"})
    assert index.name in caplog.text and truncated.name in caplog.text and "rebuilding" in caplog.text
    with lakelog.connect(restarted.address) as conn:
        table = conn.get_table(table.path)
        for bucket in (0, 1):
            assert read_bucket(conn, table, bucket) == list(range(conn.admin.list_offsets(table.path)[bucket]))
        middle = conn.admin.list_offsets(table.path, [0])[0] // 2
        assert read_bucket(conn, table, 0, middle)[0] == middle
        # The rebuilt time indexes answer every batch's timestamp with that batch.
        for base_offset, ts in batches:
            assert conn.admin.list_offsets(table.path, [0], lakelog.OffsetSpec.timestamp(ts)) == {0: base_offset}, ts


@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_corrupt_remote_manifest_names_the_manifest_and_local_keeps_serving(server_factory, tmp_path: Path, damage: str) -> None:
    conf = {**BASE_CONF, "log.segment.max-bytes": "16kb", "remote.data.dir": (tmp_path / "remote").as_uri()}
    server = server_factory(tmp_path / "data", **conf)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, buckets=2)
        produce(table, 80)
        assert remote_manager(server).run_once().deleted_local > 0
    server.stop()
    manifest = next((tmp_path / "remote").glob("log/shop/orders-*/0/manifest.json"))
    data = manifest.read_bytes()
    manifest.write_bytes(data[: len(data) // 2] if damage == "truncated" else data.replace(b'"segments"', b'"segmentz"'))

    restarted = server_factory(tmp_path / "data", **conf)
    with lakelog.connect(restarted.address) as conn:
        table = conn.get_table(table.path)
        with pytest.raises(RemoteStorageError, match="manifest.json"):
            conn.admin.describe_buckets(table.path)
        assert read_bucket(conn, table, 1) == list(range(conn.admin.list_offsets(table.path, [1])[1])), "bucket 1 unaffected"
        answer = fetch(restarted, table, 0)
        assert answer.error_code == RemoteStorageError.code
        assert f"{manifest.as_uri()}: not a remote log manifest" in answer.error_message, answer.error_message
        hw = conn.admin.list_offsets(table.path, [0])[0]
        tail = read_bucket(conn, table, 0, hw - 50)
        assert tail == list(range(hw - 50, hw)), "the local tail of the damaged bucket still serves"


@pytest.mark.parametrize("source", ["iceberg-arrow", "iceberg"])
@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_corrupt_lake_data_file_names_the_file(server_factory, tmp_path: Path, spark, damage: str, source: str) -> None:
    from lakelog.tiering.tiering_job import TieringJob, TieringOptions

    conf = {**BASE_CONF, "remote.data.dir": (tmp_path / "remote").as_uri()}
    server = server_factory(tmp_path / "data", **conf)
    with lakelog.connect(server.address, {"client.lake.source": source}) as conn:
        table = create_table(conn, buckets=2, properties={**LAKE_TABLE, "table.log.ttl": "1d"})
        produce(table, 60)
        manager = remote_manager(server)
        manager.run_once()
        with TieringJob(TieringOptions(bootstrap=server.address), spark=spark) as job:
            assert job.run_round().records > 0
        assert expire_remote(manager, days=2).expired > 0
        files = sorted((tmp_path / "data" / "lake").rglob("__bucket=0/*.parquet"))
        assert files
        victim = files[0]
        data = bytearray(victim.read_bytes())
        if damage == "truncated":
            victim.write_bytes(bytes(data[: len(data) // 2]))
        else:
            data[len(data) // 3 : len(data) // 3 + 64] = b"\x00" * 64
            victim.write_bytes(bytes(data))

        # Flipped (a page CRC fails) and truncated (no Parquet footer) alike: damaged data, which a
        # retry cannot fix, so LakeDataError (not the retriable LakeError of a storage outage), naming the file.
        with pytest.raises(LakeDataError) as caught:
            read_bucket(conn, table, 0)
        assert str(caught.value).startswith(f"cannot read lake data file file://{victim}: "), caught.value
        assert read_bucket(conn, table, 1) == list(range(conn.admin.list_offsets(table.path, [1])[1])), "bucket 1 unaffected"
