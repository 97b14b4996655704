"""Consumer groups: member processes sharing a table's six buckets.

- Consumption with 1, 2 and 3 member processes (the scaling section): from the moment the members,
  already started and connected, are told to go, until the group's committed offsets reach every
  bucket's end. It includes joining and the first assignment.
- A member killed with SIGKILL while a writer feeds every bucket: the time until each of its buckets
  is read again by another member, seen as that bucket's committed offset moving past where it was
  at the kill (commits follow reads by one poll). The coordinator notices the silent member after
  ``client.scanner.group.session-timeout`` (default 10 s), so that setting governs it.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import lakelog

from bench import data
from bench.cluster import BenchCluster
from bench.measure import Result, percentile, progress
from bench.scaling import Point
from bench.sizes import Sizes

BUCKETS = 6
MEMBERS = (1, 2, 3)
SESSION_TIMEOUT_S = 10.0  # the default of client.scanner.group.session-timeout, which the members keep
TAKEOVER_TARGET_S = SESSION_TIMEOUT_S + 5
FEED_INTERVAL_S = 0.02
REPO = Path(__file__).resolve().parent.parent


class Member:
    """A :mod:`bench.group_reader` process, ready once it printed so."""

    def __init__(self, address: str, path: lakelog.TablePath, group: str, go: Path) -> None:
        self.log = go.with_name(f"{group}-{time.monotonic_ns()}.log")
        with self.log.open("w") as errors:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bench.group_reader", address, f"{path.database}.{path.table}", group, str(go)],
                stdout=subprocess.PIPE, stderr=errors, text=True, cwd=REPO,
            )
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"a group member exited with {self.proc.wait()} before it was ready: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result | Point]:
    table = cluster.table("groups", buckets=BUCKETS)
    try:
        cluster.produce(table, sizes.group_records)
        points: list[Result | Point] = [_consume(cluster, table, members, sizes) for members in MEMBERS]
        return points + _takeovers(cluster, table, sizes)
    finally:
        cluster.drop(table)


def _wait(condition: Callable[[], Any], what: str, timeout_s: float = 300) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"never happened: {what}")
        time.sleep(0.02)
    return result


def _consume(cluster: BenchCluster, table: lakelog.Table, members: int, sizes: Sizes) -> Point:
    records = sizes.group_records
    seconds = []
    for run in range(sizes.runs):
        group = f"consume-{members}-{run}"
        go = cluster.directory / f"{group}.go"
        started = [Member(cluster.server.address, table.path, group, go) for _ in range(members)]
        try:
            began = time.monotonic()
            go.touch()
            _wait(lambda: sum(cluster.conn.admin.list_group_offsets(group, table.path).values()) >= records, f"group {group} read everything")
            seconds.append(time.monotonic() - began)
        finally:
            for member in started:
                member.stop()
    rate = records / statistics.median(seconds)
    progress(f"groups: {members} member(s): {rate:,.0f} records/s")
    return Point("group members", members, rate, rate * data.RECORD_BYTES, records)


def _takeovers(cluster: BenchCluster, table: lakelog.Table, sizes: Sizes) -> list[Result]:
    group = "takeover"
    go = cluster.directory / f"{group}.go"
    go.touch()
    stop = threading.Event()
    feeder = threading.Thread(target=_feed, args=(table, stop), daemon=True)
    feeder.start()
    members = [Member(cluster.server.address, table.path, group, go) for _ in range(3)]
    samples: list[float] = []
    admin = cluster.conn.admin
    try:
        for kill in range(sizes.group_kills):
            live = {member.proc.pid for member in members}
            described = _wait(lambda: _settled(admin.describe_group(group), live), "three members share the buckets with commits")
            victim = described.members[0]
            pid = _pid(victim)
            before = admin.list_group_offsets(group, table.path)
            os.kill(pid, signal.SIGKILL)
            killed = time.monotonic()
            keys = [bucket.public_key() for bucket in victim.buckets]

            def taken_over() -> bool:
                """The victim left the group and its buckets were read again: a commit it sent just
                before the kill advances its buckets' offsets too, but it leaves them in its hands."""
                if any(_pid(member) == pid for member in admin.describe_group(group).members):
                    return False
                return all(admin.list_group_offsets(group, table.path).get(k, -1) > before.get(k, -1) for k in keys)

            _wait(taken_over, "the buckets read again")
            samples.append(time.monotonic() - killed)
            progress(f"groups: kill {kill + 1}: its buckets read again after {samples[-1]:.2f} s")
            members = [m for m in members if m.proc.pid != pid] + [Member(cluster.server.address, table.path, group, go)]
    finally:
        stop.set()
        feeder.join()
        for member in members:
            member.stop()
    detail = f"{len(samples)} kills of one of 3 members of a 6-bucket table fed every {FEED_INTERVAL_S * 1000:.0f} ms, session timeout {SESSION_TIMEOUT_S:.0f} s (default)"
    return [
        Result(
            f"G2{suffix}", f"Group: kill -9 of a member to its buckets read again, {name}", percentile(samples, q), "s", None, "",
            percentile(samples, q), TAKEOVER_TARGET_S if q == 99 else None, lower_is_better=True, detail=detail,
            next_step="a silent member loses its buckets after client.scanner.group.session-timeout; a shorter session "
            "hands them on sooner and risks taking buckets from a member that was only paused",
        )
        for suffix, name, q in (("a", "p50", 50), ("b", "p99", 99))
    ]


def _settled(described: Any, live: set[int]) -> Any:
    """The three ``live`` member processes with two buckets each, every bucket committed: ready for
    the next kill. A killed member stays in the group until its session times out."""
    held = [len(member.buckets) for member in described.members]
    committed = all(state.committed is not None for state in described.buckets)
    ready = held == [2, 2, 2] and committed and len(described.buckets) == BUCKETS
    return described if ready and {_pid(member) for member in described.members} == live else None


def _pid(member: Any) -> int:
    """The process of a group member: the last part of its client id."""
    return int(member.client_id.rsplit("/", 1)[1])


def _feed(table: lakelog.Table, stop: threading.Event) -> None:
    """One record into every bucket every ``FEED_INTERVAL_S``, until ``stop``."""
    next_id = 10**9
    with table.new_append().create_writer() as writer:
        while not stop.wait(FEED_INTERVAL_S):
            for bucket in range(BUCKETS):
                writer.append_arrow(data.rows(next_id, 1), bucket=bucket)
                next_id += 1
            writer.flush()
