"""LogManager: the bucket logs of one tablet server, under <root>/<table_id>/<bucket>/."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from lakelog.server.log.log_manager import LogManager
from lakelog.server.log.log_tablet import LogConfig

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
