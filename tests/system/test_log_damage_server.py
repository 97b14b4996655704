"""Damaged local logs on real servers: a quarantined rolled segment is read from its
remote copy or fails naming the file; a bucket that lost acknowledged records refuses writes until
`lakelog repair local ... --accept-truncation`, and never reuses an offset."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

import lakelog
from lakelog.errors import CorruptRecordError, LogFencedError
from lakelog.server.log.acknowledged_offset import AcknowledgedOffsetCheckpoint
from lakelog.server.server_process import ServerProcess
from tests.harness.log_damage import damage_last_length
from tests.harness.remote_tier import BATCHES, ROWS_PER_BATCH, produce, remote_manager
from tests.harness.server_subprocess import ServerSubprocess
from tests.harness.tables import create_table, order_rows, scan_all

TOTAL = BATCHES * ROWS_PER_BATCH


def bucket_dir(data_dir: Path, table: lakelog.Table) -> Path:
    return data_dir / "tablet-server" / "log" / str(table.info.table_id) / "0"


def read_ids(address: str, path: lakelog.TablePath, start: int, count: int) -> list[int]:
    with lakelog.connect(address) as conn:
        with conn.get_table(path).new_scan().project(["id"]).create_log_scanner() as scanner:
            scanner.subscribe(0, start)
            return scan_all(scanner, count).column("id").to_pylist()


@pytest.mark.parametrize("uploaded", [True, False], ids=["remote-copy", "no-remote-copy"])
def test_quarantined_segment_is_served_from_its_remote_copy_or_fails_naming_the_file(
    server_factory: Callable[..., ServerProcess], tmp_path: Path, uploaded: bool
) -> None:
    data_dir = tmp_path / "data"
    conf = {"log.segment.max-bytes": "64kb", "remote.log.task-interval": "1h", "remote.data.dir": (tmp_path / "remote").as_uri()}
    server = server_factory(data_dir, **conf)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, properties={"table.log.tiered.local-segments": "4"})
        produce(table)
    if uploaded:
        assert remote_manager(server).run_once().uploaded > 0
    local = server.tablet.logs.get(table.info.table_id, 0)
    damaged, after = local.segments[-3], local.segments[-2]
    server.stop()
    damage_last_length(damaged.path)

    restarted = server_factory(data_dir, **conf)
    assert restarted.metrics.registry.get_sample_value("lakelog_quarantined_segments", {"table": "shop.orders"}) == 1
    if uploaded:
        assert read_ids(restarted.address, table.path, 0, TOTAL) == list(range(TOTAL))
    else:
        with pytest.raises(CorruptRecordError, match=rf"{damaged.path.name}.quarantined.*offset {damaged.base_offset}"):
            read_ids(restarted.address, table.path, 0, TOTAL)
        assert read_ids(restarted.address, table.path, after.base_offset, TOTAL - after.base_offset) == list(
            range(after.base_offset, TOTAL)
        )
    with lakelog.connect(restarted.address) as conn:  # the bucket still takes writes after its end
        with conn.get_table(table.path).new_append().create_writer() as writer:
            writer.append_arrow(order_rows(TOTAL, 10))
        assert conn.admin.list_offsets(table.path) == {0: TOTAL + 10}


def repair_local(address: str, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "lakelog", "repair", "local", "shop.orders", "--bootstrap", address, *flags]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_lost_acknowledged_tail_fences_writes_until_repair_local_accepts_the_loss(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = ServerSubprocess(data_dir).start()
    try:
        with lakelog.connect(server.address) as conn:
            table = create_table(conn)
            for start in range(0, 300, 100):
                with table.new_append().create_writer() as writer:
                    writer.append_arrow(order_rows(start, 100))
        log_dir, key = data_dir / "tablet-server" / "log", f"{table.info.table_id}/0"
        deadline = time.monotonic() + 30
        while AcknowledgedOffsetCheckpoint.read(log_dir).get(key) != 300:  # the server's 1 s timer
            assert time.monotonic() < deadline, "the acknowledged offset was never checkpointed"
            time.sleep(0.1)
    finally:
        server.kill()
    segment = sorted(bucket_dir(data_dir, table).glob("*.log"))[-1]
    with open(segment, "r+b") as file:  # media damage in the last acknowledged batch
        file.seek(segment.stat().st_size - 5)
        file.write(b"\xde\xad\xbe\xef\x00")

    restarted = ServerSubprocess(data_dir).start()
    try:
        with lakelog.connect(restarted.address) as conn:
            table = conn.get_table(table.path)
            with pytest.raises(LogFencedError, match="shop.orders bucket 0: the log recovered to offset 200 but offsets up to 300"):
                with table.new_append().create_writer() as writer:
                    writer.append_arrow(order_rows(300, 10))
            assert read_ids(restarted.address, table.path, 0, 200) == list(range(200))

            refused = repair_local(restarted.address, "--bucket", "0")
            assert refused.returncode == 1 and "--accept-truncation" in refused.stderr
            accepted = repair_local(restarted.address, "--bucket", "0", "--accept-truncation")
            assert accepted.returncode == 0, accepted.stderr
            assert "bucket 0: shop.orders bucket 0: accepted the loss of offsets [200, 300)" in accepted.stdout

            with table.new_append().create_writer() as writer:
                writer.append_arrow(order_rows(1000, 10))
            assert conn.admin.list_offsets(table.path) == {0: 210}
            assert read_ids(restarted.address, table.path, 200, 10) == list(range(1000, 1010))
    finally:
        restarted.stop()


def test_a_damaged_header_is_named_by_the_server_and_never_uploaded(server_factory: Callable[..., ServerProcess], tmp_path: Path) -> None:
    """A flipped byte in a stamped header field (outside the CRC) of a closed segment, found after a
    restart: the fetch error names the file and the byte, not "a gap or an overlap", and the remote
    task uploads the segments before it but never the damaged one."""
    from lakelog.record.batch import iter_headers

    data_dir = tmp_path / "data"
    conf = {"log.segment.max-bytes": "64kb", "remote.log.task-interval": "1h", "remote.data.dir": (tmp_path / "remote").as_uri()}
    server = server_factory(data_dir, **conf)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn)
        produce(table)
    victim = server.tablet.logs.get(table.info.table_id, 0).segments[1]
    server.stop()
    position = [p for p, _ in iter_headers(victim.path.read_bytes())][1]
    with open(victim.path, "r+b") as file:
        file.seek(position + 7)  # the low byte of the second batch's base offset
        byte = file.read(1)
        file.seek(position + 7)
        file.write(bytes([byte[0] ^ 0x01]))

    restarted = server_factory(data_dir, **conf)
    with pytest.raises(CorruptRecordError) as raised:
        read_ids(restarted.address, table.path, 0, TOTAL)
    message = str(raised.value)
    assert f"{victim.path} at byte {position}" in message and "damaged header" in message
    assert "gap or an overlap" not in message
    report = remote_manager(restarted).run_once()
    assert report.uploaded == 1 and [type(e) for e in report.errors] == [CorruptRecordError]
    assert f"{victim.path} at byte {position}" in str(report.errors[0])
    assert restarted.tablet.remote.manifest(table.info.table_id, 0).end_offset == victim.base_offset
