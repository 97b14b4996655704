"""A damaged rolled segment that was never uploaded stops the bucket's uploads: the
segments after it stay local, so remote storage never holds a range with a hole before it, and the
stop is named at ERROR and counted in ``lakelog_remote_upload_blocked_buckets``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

import pytest

import lakelog
from lakelog.server.server_process import ServerProcess
from tests.harness.log_damage import damage_last_length
from tests.harness.remote_tier import BATCHES, ROWS_PER_BATCH, produce, remote_manager
from tests.harness.tables import create_table

TOTAL = BATCHES * ROWS_PER_BATCH


def test_a_never_uploaded_quarantined_segment_stops_uploads_past_it(
    server_factory: Callable[..., ServerProcess], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir = tmp_path / "data"
    conf = {"log.segment.max-bytes": "64kb", "remote.log.task-interval": "1h", "remote.data.dir": (tmp_path / "remote").as_uri()}
    server = server_factory(data_dir, **conf)
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, properties={"table.log.tiered.local-segments": "1"})
        produce(table)
    segments = server.tablet.logs.get(table.info.table_id, 0).segments
    assert len(segments) > 3
    damaged = segments[0]
    server.stop()
    damage_last_length(damaged.path)

    restarted = server_factory(data_dir, **conf)
    with caplog.at_level(logging.ERROR):
        report = remote_manager(restarted).run_once()
    assert report.uploaded == 0 and report.deleted_local == 0 and not report.errors
    manifest = restarted.tablet.remote.manifest(table.info.table_id, 0)
    assert manifest.segments == [] or manifest.segments == ()
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and "uploads stop" in r.getMessage()]
    assert len(errors) == 1 and f"offset {damaged.base_offset}" in errors[0] and damaged.path.name in errors[0], errors
    metric = restarted.metrics.registry.get_sample_value("lakelog_remote_upload_blocked_buckets", {"table": "shop.orders"})
    assert metric == 1
    local = restarted.tablet.logs.get(table.info.table_id, 0)
    assert len(local.segments) == len(segments) - 1, "the segments past the damaged one stay local"
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert remote_manager(restarted).run_once().uploaded == 0
    assert not [r for r in caplog.records if "uploads stop" in r.getMessage()], "named once, not every pass"
    with lakelog.connect(restarted.address) as conn:  # the bucket still takes writes and serves past the hole
        assert conn.admin.list_offsets(table.path) == {0: TOTAL}
