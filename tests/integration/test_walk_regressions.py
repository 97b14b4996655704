"""Regression tests for what the random walk (tests/harness/walk.py) found, named after the seed."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import RemoteStorageError
from tests.harness.remote_tier import produce, remote_manager
from tests.harness.tables import create_table, scan_all


def test_seed_2_remote_outage_after_tablet_restart_is_reported_not_a_silent_stall(server_factory, moto_s3, s3_outage, tmp_path) -> None:
    """Seed 2, step 40: the tablet server restarted while S3 was down, so it could not read the
    bucket's manifest; the client took the server's RemoteStorageError for a leader change and
    retried silently forever. A storage outage must reach the caller as a retriable error, and the
    read must continue with no gap once storage is back."""
    conf = {
        "log.segment.max-bytes": "16kb",
        "remote.log.task-interval": "1h",
        "remote.data.dir": f"s3://{moto_s3.create_bucket()}/remote",
        "remote.fs.s3.max-attempts": "1",
        **moto_s3.settings(),
    }
    data_dir = tmp_path / "data"
    server = server_factory(data_dir, **conf)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn)
        produce(table, 60)
        assert remote_manager(server).run_once().deleted_local > 0
    server.stop()
    s3_outage.cut()
    restarted = server_factory(data_dir, **conf)
    with lakelog.connect(restarted.address, moto_s3.settings()) as conn:
        table = conn.get_table(table.path)
        total = conn.admin.list_offsets(table.path, [0])[0]
        scanner = table.new_scan().create_log_scanner()
        scanner.subscribe(0, 0)
        deadline = time.monotonic() + 60
        with pytest.raises(RemoteStorageError, match="manifest.json"):
            while time.monotonic() < deadline:
                assert not scanner.poll(timeout_ms=500), "no record can be read while the remote tier is down"
        s3_outage.restore()
        assert scan_all(scanner, total).column("__offset").to_pylist() == list(range(total))


def test_seed_1_a_partition_not_subscribed_while_remote_storage_is_down_is_read_once_it_is_back(
    server_factory, moto_s3, s3_outage, tmp_path
) -> None:
    """Seed 1, step 12 (partitioned tables): subscribing a partition failed while S3 was down (its
    log had been tiered and cut locally, and the restarted server could not read its manifest for
    the earliest offset), and the whole-table reader kept the half-made subscription, so no later
    discovery subscribed the partition again and it waited forever. The failure must reach the
    caller as a storage error on every poll, and the partition be read once S3 is back."""
    conf = {
        "log.segment.max-bytes": "16kb",
        "remote.data.dir": f"s3://{moto_s3.create_bucket()}/remote",
        "remote.log.task-interval": "1h",
        "remote.fs.s3.max-attempts": "1",
        **moto_s3.settings(),
    }
    data_dir = tmp_path / "data"
    server = server_factory(data_dir, **conf)
    schema = pa.schema([("dt", pa.string()), ("id", pa.int64())])
    path = lakelog.TablePath("shop", "days")
    batches, rows_per_batch = 40, 200
    total = batches * rows_per_batch
    with lakelog.connect(server.address) as conn:
        conn.admin.create_database("shop")
        conn.admin.create_table(path, lakelog.TableDescriptor(schema, 1, partition_keys=["dt"]))
        with conn.get_table(path).new_append().create_writer() as writer:
            for first in range(0, total, rows_per_batch):
                ids = list(range(first, first + rows_per_batch))
                writer.append_arrow(pa.table({"dt": ["d1"] * rows_per_batch, "id": ids}, schema=schema))
                writer.flush()
        assert remote_manager(server).run_once().deleted_local > 0
    server.stop()
    s3_outage.cut()
    restarted = server_factory(data_dir, **conf)
    with lakelog.connect(restarted.address, {**moto_s3.settings(), "client.scanner.partition-discovery.interval": "100ms"}) as conn:
        with conn.get_table(path).new_scan().create_log_scanner() as scanner:
            with pytest.raises(RemoteStorageError, match="manifest.json"):
                scanner.subscribe_from_beginning()
            deadline = time.monotonic() + 30
            with pytest.raises(RemoteStorageError, match="manifest.json"):
                while time.monotonic() < deadline:
                    assert not scanner.poll(timeout_ms=200), "no record can be read before the partition is subscribed"
            s3_outage.restore()
            rows = scan_all(scanner, total)
    assert rows.column("id").to_pylist() == list(range(total)) and rows.column("__offset").to_pylist() == list(range(total))
