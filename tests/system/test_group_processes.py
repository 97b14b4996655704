"""Consumer groups with real member processes (docs/contract.md, "Consumer groups"): members share
a table's buckets exactly, a member killed with -9 loses its buckets to the others after its session
from its last commit, members come and go while others poll, the coordinator restarts under a
live group, and a partition created while the group reads is shared out too.

Each member is ``tests.harness.group_member`` in its own process, writing every record it was given to a
file before its next poll commits it. "Nothing lost": the files together hold every offset of every
bucket. "Nothing committed read again": an offset read twice lies at or after the committed offset
of its bucket when its reader died; where nobody died, no offset is read twice at all.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable

import pyarrow as pa
import pytest

import lakelog
from lakelog.server.server_process import ServerProcess
from tests.harness.server_subprocess import ServerSubprocess
from tests.harness.tables import ORDERS_SCHEMA, order_rows
from tests.harness.waiting import wait_until
from tests.harness.os_process import Process
from tests.harness.s3 import free_port

REPO = Path(__file__).resolve().parent.parent
SESSION = "2s"
Key = tuple[int, int]  # (partition_id or 0, bucket)


class Members:
    """Member processes of group ``g`` on one table, their files in ``tmp``."""

    def __init__(self, address: str, table: str, tmp: Path, max_poll_records: int = 20, pause_ms: int = 20) -> None:
        self.address, self.table, self.tmp = address, table, tmp
        self.extra = ["--session-timeout", SESSION, "--max-poll-records", str(max_poll_records), "--pause-ms", str(pause_ms)]
        self.running: dict[str, Process] = {}
        self.files: dict[str, Path] = {}

    def start(self, name: str) -> Process:
        out = self.tmp / f"{name}.reads"
        self.files[name] = out
        args = [sys.executable, "-m", "tests.harness.group_member", self.address, self.table, "g", str(out), *self.extra]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        process = Process(name, args, self.tmp, lambda: out.exists() and out.read_text().count("\n") >= 1, env).start()
        self.running[name] = process
        return process

    def reads(self, name: str) -> list[tuple[int, int, int]]:
        """``(partition_id or 0, bucket, offset)`` of every record the member wrote down (a line
        cut short by a kill is left out)."""
        lines = self.files[name].read_text().split("\n")[1:-1]  # the last piece ends with no newline
        return [(int(p), int(b), int(o)) for p, b, o in (line.split() for line in lines)]

    def all_reads(self) -> Counter[tuple[int, int, int]]:
        counts: Counter[tuple[int, int, int]] = Counter()
        for name in self.files:
            counts.update(self.reads(name))
        return counts

    def stop(self) -> None:
        for process in self.running.values():
            process.stop()


@pytest.fixture
def members_of(tmp_path: Path) -> Iterable[Callable[..., Members]]:
    made: list[Members] = []

    def make(address: str, table: str, **kwargs: Any) -> Members:
        members = Members(address, table, tmp_path, **kwargs)
        made.append(members)
        return members

    yield make
    for members in made:
        members.stop()


def keyed_table(conn: lakelog.Connection, buckets: int = 6) -> lakelog.Table:
    path = lakelog.TablePath("shop", "events")
    conn.admin.create_database("shop", ignore_if_exists=True)
    conn.admin.create_table(path, lakelog.TableDescriptor(ORDERS_SCHEMA, buckets, bucket_keys=["id"]))
    return conn.get_table(path)


def produce(table: lakelog.Table, start: int, count: int) -> None:
    with table.new_append().create_writer() as writer:
        writer.append_arrow(order_rows(start, count))
        writer.flush()


def every_offset(conn: lakelog.Connection, path: lakelog.TablePath, partitions: dict[int, str] | None = None) -> set[tuple[int, int, int]]:
    """Every (partition_id or 0, bucket, offset) the table holds now."""
    wanted = set()
    named: dict[int, str | None] = dict(partitions) if partitions else {0: None}
    for partition_id, name in named.items():
        for bucket, end in conn.admin.list_offsets(path, spec=lakelog.OffsetSpec.latest(), partition_name=name).items():
            wanted |= {(partition_id, bucket, offset) for offset in range(end)}
    return wanted


def read_everything(members: Members, wanted: set[tuple[int, int, int]]) -> Counter[tuple[int, int, int]]:
    def complete() -> Counter[tuple[int, int, int]] | None:
        reads = members.all_reads()
        return reads if wanted <= set(reads) else None

    return wait_until(complete, "the group read every record", 120)


def check_exact(reads: Counter[tuple[int, int, int]], wanted: set[tuple[int, int, int]], read_again_from: dict[Key, int] | None = None) -> None:
    """Nothing lost, nothing more; an offset read twice only at or after ``read_again_from`` of its bucket."""
    assert set(reads) == wanted
    floors = read_again_from or {}
    twice = sorted(key for key, count in reads.items() if count > 1)
    wrong = [key for key in twice if key[:2] not in floors or key[2] < floors[key[:2]]]
    assert not wrong, f"read again though committed: {wrong[:10]} (of {len(twice)} read twice; floors {floors})"


def holdings(conn: lakelog.Connection) -> list[set[Key]]:
    return [{(b.partition_id, b.bucket) for b in m.buckets} for m in conn.admin.describe_group("g").members]


def shared_exactly(conn: lakelog.Connection, members: int, keys: set[Key]) -> list[set[Key]] | None:
    held = holdings(conn)
    union = [key for mine in held for key in mine]
    if len(held) == members and sorted(union) == sorted(keys) and max(map(len, held)) - min(map(len, held)) <= 1:
        return held
    return None


SIX = {(0, b) for b in range(6)}


def start_group(conn: lakelog.Connection, members: Members, *names: str) -> lakelog.Table:
    """The six-bucket table with 6,000 records, and members ``names`` reading it."""
    table = keyed_table(conn)
    produce(table, 0, 6000)
    for name in names:
        members.start(name)
    return table


def test_three_members_share_six_buckets_and_a_killed_ones_buckets_go_on_from_its_last_commit(
    server: ServerProcess, members_of: Callable[..., Members]
) -> None:
    with lakelog.connect(server.address) as conn:
        members = members_of(server.address, "shop.events", max_poll_records=10)
        table = start_group(conn, members, "a", "b", "c")
        held = wait_until(lambda: shared_exactly(conn, 3, SIX), "three members hold two buckets each")
        assert all(len(mine) == 2 for mine in held)
        wait_until(lambda: all(members.reads(name) for name in ("a", "b", "c")), "every member read records")
        before = members.all_reads()
        assert all(count == 1 for count in before.values()), "no record read twice while members only joined"
        pid = members.files["c"].read_text().splitlines()[0]
        [victim] = [m for m in conn.admin.describe_group("g").members if m.client_id.endswith(f"/{pid}")]
        victim_buckets = {(b.partition_id, b.bucket) for b in victim.buckets}
        assert len(victim_buckets) == 2
        members.running["c"].signal(signal.SIGKILL)
        time.sleep(0.3)  # a commit c sent just before it died lands first
        committed = conn.admin.list_group_offsets("g", table.path)
        produce(table, 6000, 3000)
        wanted = every_offset(conn, table.path)
        reads = read_everything(members, wanted)
        floors = {key: committed.get(key[1], 0) for key in victim_buckets}
        check_exact(reads, wanted, floors)
        after = wait_until(lambda: shared_exactly(conn, 2, SIX), "the two live members hold every bucket")
        assert sorted(len(mine) for mine in after) == [3, 3]


def test_a_member_joins_and_leaves_while_the_others_poll(server: ServerProcess, members_of: Callable[..., Members]) -> None:
    with lakelog.connect(server.address) as conn:
        members = members_of(server.address, "shop.events")
        table = start_group(conn, members, "a", "b")
        wait_until(lambda: members.reads("a") and members.reads("b"), "both members read records")
        members.start("c")
        wait_until(lambda: shared_exactly(conn, 3, SIX), "the new member got its share")
        wait_until(lambda: members.reads("c"), "the new member read records")
        members.running["c"].stop()  # SIGTERM: the scanner commits and leaves
        wait_until(lambda: shared_exactly(conn, 2, SIX), "the two left hold every bucket again")
        produce(table, 6000, 3000)
        wanted = every_offset(conn, table.path)
        check_exact(read_everything(members, wanted), wanted)


def test_the_coordinator_restarts_under_a_live_group_and_commits_survive(
    tmp_path: Path, members_of: Callable[..., Members]
) -> None:
    port = free_port()
    server = ServerSubprocess(tmp_path / "data", "--port", str(port)).start()
    try:
        with lakelog.connect(server.address) as conn:
            members = members_of(server.address, "shop.events")
            table = start_group(conn, members, "a", "b")
            wait_until(lambda: shared_exactly(conn, 2, SIX), "two members share the buckets")
            wait_until(lambda: len(conn.admin.list_group_offsets("g", table.path)) == 6, "every bucket has a commit")
            before = conn.admin.list_group_offsets("g", table.path)
            server.kill()
            server = ServerSubprocess(tmp_path / "data", "--port", str(port)).start()
            survived = conn.admin.list_group_offsets("g", table.path)
            assert all(survived[bucket] >= offset for bucket, offset in before.items()), (before, survived)
            produce(table, 6000, 3000)
            wanted = every_offset(conn, table.path)
            check_exact(read_everything(members, wanted), wanted, {(0, b): o for b, o in before.items()})
            wait_until(lambda: shared_exactly(conn, 2, SIX), "both members joined again")
    finally:
        server.stop()


def test_a_partition_created_while_the_group_reads_is_shared_out(server: ServerProcess, members_of: Callable[..., Members]) -> None:
    schema = pa.schema([("id", pa.int64()), ("dt", pa.string())])
    path = lakelog.TablePath("shop", "events")
    with lakelog.connect(server.address) as conn:
        conn.admin.create_database("shop", ignore_if_exists=True)
        conn.admin.create_table(path, lakelog.TableDescriptor(schema, 2, partition_keys=["dt"], bucket_keys=["id"]))
        table = conn.get_table(path)

        def write(day: str, start: int, count: int) -> None:
            with table.new_append().create_writer() as writer:
                writer.append_arrow(pa.record_batch([pa.array(range(start, start + count), pa.int64()), pa.array([day] * count)], schema=schema))
                writer.flush()

        write("d1", 0, 2000)
        members = members_of(server.address, "shop.events")
        members.start("a")
        members.start("b")
        wait_until(lambda: members.reads("a") and members.reads("b"), "both members read records")
        write("d2", 2000, 2000)
        partitions = {p.partition_id: p.partition_name for p in conn.admin.list_partition_infos(path)}
        new = next(pid for pid, name in partitions.items() if name == "d2")
        keys = {(pid, b) for pid in partitions for b in range(2)}
        held = wait_until(lambda: shared_exactly(conn, 2, keys), "the new partition's buckets are shared out")
        assert {(new, 0), (new, 1)} <= set().union(*held)
        wanted = every_offset(conn, path, partitions)
        check_exact(read_everything(members, wanted), wanted)
