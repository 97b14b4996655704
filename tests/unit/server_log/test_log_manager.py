"""LogManager: the bucket logs of one tablet server, under <root>/<table_id>/<bucket>/, and their\nacknowledged offsets in one checkpoint file."""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path
from typing import Callable

import pytest

from lakelog.errors import LogFencedError
from lakelog.server.log import acknowledged_offset
from lakelog.server.log.acknowledged_offset import ACKNOWLEDGED_OFFSET_FILE, CHECKPOINT_FILE, AcknowledgedOffsetCheckpoint
from lakelog.server.log.log_manager import LogManager
from lakelog.server.log.log_tablet import LogConfig, LogTablet

MakeBatch = Callable[..., bytes]


def test_get_or_create_forwards_high_watermarks(tmp_path: Path, make_batch: MakeBatch, clock) -> None:
    advanced: list[tuple[int, int]] = []
    manager = LogManager(tmp_path, LogConfig(), lambda table_id, bucket: advanced.append((table_id, bucket)), clock)
    tablet = manager.get_or_create(7, 2, "shop.orders")
    assert manager.get_or_create(7, 2, "shop.orders") is tablet
    assert manager.get(7, 2) is tablet and manager.get(7, 3) is None
    assert tablet.directory == tmp_path / "7" / "2" and tablet.directory.is_dir()
    assert tablet.name == "shop.orders bucket 2" and tablet.bucket == 2
    tablet.append(make_batch(3))
    assert advanced == [(7, 2)]
    manager.close_all()


def test_concurrent_get_or_create_opens_one_tablet(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig())
    found = []
    threads = [threading.Thread(target=lambda: found.append(manager.get_or_create(1, 0, "t"))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 8 and all(tablet is found[0] for tablet in found)
    manager.close_all()


def test_drop_table_deletes_its_logs_only(tmp_path: Path, make_batch: MakeBatch) -> None:
    manager = LogManager(tmp_path, LogConfig())
    manager.get_or_create(1, 0, "a").append(make_batch(1))
    manager.get_or_create(1, 1, "a").append(make_batch(1))
    kept = manager.get_or_create(2, 0, "b")
    manager.drop_table(1)
    assert not (tmp_path / "1").exists() and manager.get(1, 0) is None
    assert kept.append(make_batch(1)).base_offset == 0
    manager.drop_table(99)  # nothing to drop is fine
    manager.close_all()


def test_tick_rolls_aged_segments(tmp_path: Path, make_batch: MakeBatch, clock) -> None:
    manager = LogManager(tmp_path, LogConfig(segment_max_age_ms=1000), clock=clock)
    old = manager.get_or_create(1, 0, "t")
    old.append(make_batch(2))
    clock.now += 600
    young = manager.get_or_create(1, 1, "t")
    young.append(make_batch(2))
    clock.now += 500
    manager.tick()
    assert [s.base_offset for s in old.segments] == [0, 2]
    assert [s.base_offset for s in young.segments] == [0]
    manager.close_all()


def _tail_damaged(tablet: LogTablet) -> None:
    """Media damage inside the last batch's body, which only a crash's full recovery sees."""
    path = tablet.segments[-1].path
    with open(path, "r+b") as file:
        file.seek(path.stat().st_size - 3)
        byte = file.read(1)
        file.seek(-1, 1)
        file.write(bytes([byte[0] ^ 0xFF]))


def test_one_checkpoint_file_holds_every_buckets_acknowledged_offset_written_once_a_tick(
    tmp_path: Path, make_batch: MakeBatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tick writes every bucket's durable offset into one file (two fsyncs a tick, not two per
    bucket written to), and not at all when nothing changed; so does closing them all."""
    writes: list[Path] = []
    real_write = acknowledged_offset.write_atomically
    monkeypatch.setattr(acknowledged_offset, "write_atomically", lambda path, data: (writes.append(path), real_write(path, data)))
    manager = LogManager(tmp_path, LogConfig())
    for table_id, bucket in [(1, 0), (1, 1), (2, 0)]:
        manager.get_or_create(table_id, bucket, "t").append(make_batch(3 + bucket))
    manager.tick()
    assert writes == [tmp_path / CHECKPOINT_FILE]
    assert AcknowledgedOffsetCheckpoint.read(tmp_path) == {"1/0": 3, "1/1": 4, "2/0": 3}
    assert not list(tmp_path.glob(f"*/*/{ACKNOWLEDGED_OFFSET_FILE}"))
    manager.tick()
    assert len(writes) == 1, "nothing changed, nothing written"
    manager.get(1, 1).append(make_batch(2))
    manager.tick()
    assert len(writes) == 2 and AcknowledgedOffsetCheckpoint.read(tmp_path)["1/1"] == 6
    for table_id, bucket in [(1, 0), (1, 1), (2, 0)]:
        manager.get(table_id, bucket).append(make_batch(1))
    manager.close_all()
    assert len(writes) == 3, "closing every log writes their offsets once"
    assert AcknowledgedOffsetCheckpoint.read(tmp_path) == {"1/0": 4, "1/1": 7, "2/0": 4}


def test_a_restarted_manager_fences_a_bucket_that_recovered_below_its_checkpointed_offset(tmp_path: Path, make_batch: MakeBatch) -> None:
    crashed = LogManager(tmp_path, LogConfig())
    damaged, intact = crashed.get_or_create(1, 0, "t"), crashed.get_or_create(1, 1, "t")
    for _ in range(3):
        damaged.append(make_batch(4))
        intact.append(make_batch(4))
    crashed.tick()
    _tail_damaged(damaged)

    restarted = LogManager(tmp_path, LogConfig())  # `crashed` never closed: this follows a crash
    recovered = restarted.get_or_create(1, 0, "t")
    assert recovered.log_end_offset == 8
    with pytest.raises(LogFencedError, match="recovered to offset 8 but offsets up to 12"):
        recovered.append(make_batch(1))
    assert restarted.get_or_create(1, 1, "t").append(make_batch(1)).base_offset == 12
    assert "offsets [8, 12)" in recovered.accept_truncation()
    assert AcknowledgedOffsetCheckpoint.read(tmp_path)["1/0"] == 8, "the operator's choice is written at once"
    assert recovered.append(make_batch(1)).base_offset == 8
    restarted.close_all()


def test_the_checkpoint_takes_over_the_offset_a_log_alone_kept(tmp_path: Path, make_batch: MakeBatch) -> None:
    alone = LogTablet.open(tmp_path / "1" / "0", LogConfig(), 0, "t bucket 0")
    for _ in range(3):
        alone.append(make_batch(4))
    alone.checkpoint_acknowledged()
    assert (tmp_path / "1" / "0" / ACKNOWLEDGED_OFFSET_FILE).read_text() == "12"
    _tail_damaged(alone)

    manager = LogManager(tmp_path, LogConfig())
    taken_over = manager.get_or_create(1, 0, "t")
    with pytest.raises(LogFencedError, match="offsets up to 12"):
        taken_over.append(make_batch(1))
    manager.tick()
    assert AcknowledgedOffsetCheckpoint.read(tmp_path) == {"1/0": 12}
    assert not (tmp_path / "1" / "0" / ACKNOWLEDGED_OFFSET_FILE).exists(), "deleted once the checkpoint holds it"
    manager.close_all()


def test_a_dropped_table_or_a_deleted_bucket_directory_takes_its_offsets_along(tmp_path: Path, make_batch: MakeBatch) -> None:
    manager = LogManager(tmp_path, LogConfig())
    manager.get_or_create(1, 0, "a").append(make_batch(2))
    manager.get_or_create(2, 0, "b").append(make_batch(3))
    manager.get_or_create(3, 0, "c").append(make_batch(4))
    manager.tick()
    manager.drop_table(1)
    manager.tick()
    assert AcknowledgedOffsetCheckpoint.read(tmp_path) == {"2/0": 3, "3/0": 4}
    manager.close_all()
    shutil.rmtree(tmp_path / "3" / "0")  # an operator deletes a bucket's copy while the server is down

    restarted = LogManager(tmp_path, LogConfig())
    assert restarted.get_or_create(3, 0, "c").append(make_batch(1)).base_offset == 0, "starts over, unfenced"
    restarted.tick()
    assert AcknowledgedOffsetCheckpoint.read(tmp_path) == {"2/0": 3, "3/0": 1}
    restarted.close_all()


@pytest.mark.parametrize("damaged", ["0\n1/0 tw", "0\n1/0", "", "7\n1/0 2"], ids=["offset", "line", "empty", "version"])
def test_a_damaged_checkpoint_is_reported_and_the_logs_open_without_it(
    tmp_path: Path, make_batch: MakeBatch, caplog: pytest.LogCaptureFixture, damaged: str
) -> None:
    manager = LogManager(tmp_path, LogConfig())
    manager.get_or_create(1, 0, "t").append(make_batch(2))
    manager.close_all()
    (tmp_path / CHECKPOINT_FILE).write_text(damaged)
    with caplog.at_level(logging.ERROR):
        restarted = LogManager(tmp_path, LogConfig())
    assert f"{tmp_path / CHECKPOINT_FILE} is damaged" in caplog.text and "open without their acknowledged offsets" in caplog.text
    tablet = restarted.get_or_create(1, 0, "t")
    assert tablet.append(make_batch(1)).base_offset == 2
    restarted.tick()
    assert AcknowledgedOffsetCheckpoint.read(tmp_path) == {"1/0": 3}
    restarted.close_all()
