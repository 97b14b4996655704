"""kill -9 again and again under concurrent producers: no acknowledged record is ever lost and no
offset is ever reused.

One server process and one data dir for the whole loop. Each round, producers append to random
buckets and record every acknowledgement (bucket, offset range, the ids appended); the server is
killed with SIGKILL at a random moment, restarted, and the whole log read back: every bucket's
offsets run from 0 without a gap, every acknowledged id sits at its acknowledged offset, and every
offset read in an earlier round still holds what it held then (a torn tail may drop records nobody
was told were stored, never records a reader saw). CI runs 20 kills; ``LAKELOG_KILL_LOOPS=100``
runs more.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import deque
from pathlib import Path

import pytest

import lakelog
from tests.harness.server_subprocess import ServerSubprocess
from tests.harness.tables import create_table, order_rows, scan_all

KILLS = int(os.environ.get("LAKELOG_KILL_LOOPS", "20"))
BUCKETS = 3
PRODUCERS = 3
PATH = lakelog.TablePath("shop", "orders")


class Producer(threading.Thread):
    """Appends batches of random sizes to random buckets until the server goes away; keeps every
    acknowledgement with the ids it covers."""

    def __init__(self, address: str, first_id: int, seed: int) -> None:
        super().__init__(name=f"producer-{first_id}", daemon=True)
        self._address = address
        self._next_id = first_id
        self._rng = random.Random(seed)
        self._pending: deque[int] = deque()
        self.acked: list[tuple[int, int, list[int]]] = []

    def _on_ack(self, ack: lakelog.AppendAck) -> None:
        ids = [self._pending.popleft() for _ in range(ack.record_count)]
        self.acked.append((ack.bucket, ack.base_offset, ids))

    def run(self) -> None:
        try:
            with lakelog.connect(self._address, {"client.request-timeout": "2s", "client.writer.delivery-timeout": "2s"}) as conn:
                writer = conn.get_table(PATH).new_append().create_writer(on_ack=self._on_ack)
                while True:
                    count = self._rng.randint(1, 300)
                    self._pending.extend(range(self._next_id, self._next_id + count))
                    writer.append_arrow(order_rows(self._next_id, count), bucket=self._rng.randrange(BUCKETS))
                    writer.flush()
                    self._next_id += count
        except lakelog.LakelogError:
            return  # the server was killed

    @property
    def acked_records(self) -> int:
        return sum(len(ids) for _, _, ids in self.acked)


def read_log(address: str) -> dict[int, list[int]]:
    """Every bucket's ids in offset order; offsets must run from 0 without a gap."""
    with lakelog.connect(address) as conn:
        table = conn.get_table(PATH)
        total = sum(conn.admin.list_offsets(PATH).values())
        with table.new_scan().project(["id"]).create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            rows = scan_all(scanner, total).to_pydict()
    log: dict[int, list[int]] = {bucket: [] for bucket in range(BUCKETS)}
    for bucket, offset, record_id in sorted(zip(rows["__bucket"], rows["__offset"], rows["id"])):
        assert offset == len(log[bucket]), f"bucket {bucket}: offset {offset} after {len(log[bucket])} records"
        log[bucket].append(record_id)
    return log


@pytest.mark.timeout(120 + 20 * KILLS)  # a kill, a restart and a full read take seconds each
def test_kill_9_loop_loses_no_acknowledged_record_and_never_reuses_an_offset(tmp_path: Path) -> None:
    rng = random.Random(15)
    data_dir = tmp_path / "data"
    server = ServerSubprocess(data_dir).start()
    seen: dict[int, list[int]] = {bucket: [] for bucket in range(BUCKETS)}
    acked: list[tuple[int, int, list[int]]] = []
    try:
        with lakelog.connect(server.address) as conn:
            create_table(conn, buckets=BUCKETS)
        for kill in range(KILLS):
            producers = [Producer(server.address, (kill * PRODUCERS + n) * 10_000_000, rng.random()) for n in range(PRODUCERS)]
            for producer in producers:
                producer.start()
            target, deadline = rng.randint(100, 3_000), time.monotonic() + 20
            while sum(p.acked_records for p in producers) < target and time.monotonic() < deadline:
                time.sleep(0.005)
            # A kill before any acknowledgement would test only recovery, not what was promised.
            assert sum(p.acked_records for p in producers) > 0, f"kill {kill}: nothing acknowledged within 20 s"
            server.kill()
            for producer in producers:
                producer.join(30)
                assert not producer.is_alive(), f"kill {kill}: a producer still runs after the server died"
                acked += producer.acked
            server = ServerSubprocess(data_dir).start()
            log = read_log(server.address)
            for bucket, base, ids in acked:
                assert log[bucket][base : base + len(ids)] == ids, (
                    f"kill {kill}: bucket {bucket} offsets {base}..{base + len(ids) - 1} were acknowledged with other ids"
                )
            for bucket, before in seen.items():
                assert log[bucket][: len(before)] == before, f"kill {kill}: bucket {bucket} lost or rewrote offsets read before"
            seen = log
        records = sum(len(ids) for _, _, ids in acked)
        assert records > 0
        print(f"{KILLS} kills: {records:,} acknowledged records all present, {sum(map(len, seen.values())):,} offsets never reused")
    finally:
        server.stop()
