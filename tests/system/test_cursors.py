"""Cursors (docs/contract.md, "Tiering, consistent cuts and cursors"): a position no tier can serve, under each ``client.scanner.offset-reset``
mode, and a consumer that checkpoints ``(bucket, next offset)`` after every poll, is killed at random
points and resumed from its checkpoint, seeing every record exactly once across lake, remote and
local tiers."""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

import lakelog
from lakelog.errors import OffsetOutOfRangeError
from lakelog.server.server_process import ServerProcess
from tests.harness.lake_tier import expire_remote
from tests.harness.tables import create_table, order_rows
from tests.harness.three_tiers import BUCKETS, TieredLog

ROWS_PER_BATCH = 500


@pytest.fixture
def expired(tmp_path: Path, server_factory: Callable[..., ServerProcess]) -> Iterator[tuple[ServerProcess, lakelog.TablePath]]:
    """A non-lake table whose oldest offsets are gone from every tier: uploaded, trimmed locally,
    then expired remotely by moving the remote task's clock past the TTL for one pass."""
    server = server_factory(
        **{"log.segment.max-bytes": "64kb", "remote.log.task-interval": "1h", "remote.data.dir": (tmp_path / "remote").as_uri()}
    )
    assert server.tablet is not None
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, properties={"table.log.ttl": "1h", "table.log.tiered.local-segments": "1"})
        with table.new_append().create_writer() as writer:
            for i in range(20):
                writer.append_arrow(order_rows(i * ROWS_PER_BATCH, ROWS_PER_BATCH))
                writer.flush()
        server.tablet.remote.run_once()
        assert expire_remote(server.tablet.remote, days=2).expired > 0
        yield server, table.path


def _first_poll(scanner: lakelog.LogScanner, timeout_s: float = 30) -> lakelog.ScanRecords:
    deadline = time.monotonic() + timeout_s
    while not (records := scanner.poll(timeout_ms=200)):
        assert time.monotonic() < deadline, "no record arrived"
    return records


@pytest.mark.parametrize("mode", ["error", "earliest", "latest"])
def test_offset_reset_on_an_offset_no_tier_serves(
    expired: tuple[ServerProcess, lakelog.TablePath], mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    server, path = expired
    with lakelog.connect(server.address, {"client.scanner.offset-reset": mode}) as conn:
        earliest = conn.admin.list_offsets(path, spec=lakelog.OffsetSpec.earliest())[0]
        latest = conn.admin.list_offsets(path, spec=lakelog.OffsetSpec.latest())[0]
        assert 0 < earliest < latest
        table = conn.get_table(path)
        with table.new_scan().create_log_scanner() as scanner, caplog.at_level(logging.WARNING):
            scanner.subscribe(0, 1)
            if mode == "error":
                with pytest.raises(OffsetOutOfRangeError) as raised:
                    _first_poll(scanner)
                assert (raised.value.bucket, raised.value.offset, raised.value.earliest) == (0, 1, earliest)
                assert scanner.positions() == {0: 1}, "an error moves nothing"
                return
            target = earliest if mode == "earliest" else latest
            if mode == "latest":
                assert not scanner.poll(timeout_ms=1000)
                with table.new_append().create_writer() as writer:
                    writer.append_arrow(order_rows(10**6, 3))
                    writer.flush()
            records = _first_poll(scanner)
            if mode == "earliest":
                # The static log: the first poll starts at the earliest offset, contiguous, and the
                # high watermark is the log's latest.
                offsets = [r.offset for r in records]
                assert offsets == list(range(earliest, earliest + len(offsets)))
                assert [r.row["id"] for r in records] == offsets, "one bucket: id i was appended at offset i"
                assert records.high_watermark(0) == latest
            else:
                # Only what was appended after the reset: three records, ids 10**6.. in order.
                assert [(r.offset, r.row["id"]) for r in records] == [(latest + i, 10**6 + i) for i in range(3)]
                assert records.high_watermark(0) == latest + 3
            assert scanner.positions() == {0: target + len(records)}
        resets = [r.getMessage() for r in caplog.records if r.name == "lakelog.client.scanner.fetch_collector"]
        assert resets == [f"{path} bucket 0: offset 1 is out of range (offset-reset={mode}), skipping offsets [1, {target})"]


# ---------------------------------------------------------------- resumable cursors across tiers


@pytest.fixture
def tiered(three_tiers: TieredLog) -> TieredLog:
    """The session's three-tier table: these tests only read it."""
    return three_tiers


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_killed_consumer_resumes_from_its_checkpoint_exactly_once(tiered: TieredLog, seed: int) -> None:
    rng = random.Random(seed)
    config = {
        "client.lake.source": "iceberg-arrow",
        "client.lake.batch-rows": 2000,
        "client.scanner.fetch.max-bytes-per-bucket": "32kb",
    }
    high_watermarks = {b: info.high_watermark for b, info in tiered.buckets.items()}
    checkpoint = {bucket: 0 for bucket in range(BUCKETS)}  # what the consumer stores with its output
    seen: dict[int, list[tuple[int, int, int]]] = {bucket: [] for bucket in range(BUCKETS)}  # (offset, id, timestamp)
    by_tier: dict[str, int] = {}
    kills = 0
    deadline = time.monotonic() + 300
    while checkpoint != high_watermarks:
        assert time.monotonic() < deadline, f"stuck at {checkpoint} of {high_watermarks}"
        with lakelog.connect(tiered.server.address, config) as conn:
            scanner = conn.get_table(tiered.path).new_scan().create_log_scanner()
            for bucket, offset in checkpoint.items():
                scanner.subscribe(bucket, offset)
            for _ in range(rng.randint(1, 6)):  # then "killed": fetches and tier reads still in flight
                records = scanner.poll(timeout_ms=500)
                for record in records:
                    seen[record.bucket].append((record.offset, record.row["id"], record.timestamp))
                positions = scanner.positions()
                for bucket in records.buckets():
                    assert positions[bucket] == records.records(bucket)[-1].offset + 1, "moved only over what it returned"
                    assert records.high_watermark(bucket) == high_watermarks[bucket], "a static log's high watermark"
                checkpoint = positions
            for tier, count in scanner.records_by_tier().items():
                by_tier[tier] = by_tier.get(tier, 0) + count
            scanner.close()
        kills += 1
    assert kills > 5
    assert all(by_tier[tier] > 0 for tier in ("lake", "remote", "local")), by_tier
    for bucket in range(BUCKETS):
        truth = tiered.rows(bucket)
        want = list(zip(*(truth.column(name).to_pylist() for name in ("__offset", "id", "__timestamp"))))
        assert [offset for offset, _, _ in want] == list(range(high_watermarks[bucket]))
        assert seen[bucket] == want, "every record exactly once, in order, with its id and timestamp"
