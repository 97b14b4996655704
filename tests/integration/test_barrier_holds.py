"""Barrier holds: a timestamp barrier never falls between writes made under one hold, even across
tablet servers whose clocks disagree; a hold lost to its timeout is an error the writer sees."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterator

import grpc
import pytest

import lakelog
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import TabletServiceStub
from lakelog.server.log.log_tablet import wall_clock_ms
from lakelog.server.replica.barrier_holds import BarrierHolds
from lakelog.server.server_process import ServerProcess
from tests.harness.metrics_scrape import Scrape
from tests.harness.tables import create_table, order_rows

SKEW_MS = 300
PAIRS = 30


class ManualClock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_a_hold_keeps_the_safe_time_out_of_its_writes() -> None:
    clock = ManualClock(1_000)
    holds = BarrierHolds(clock, "tablet server 1")
    assert holds.safe_time(999) == 999
    assert holds.open("a", timeout_ms=10_000) == 1_000
    clock.now = 1_500
    assert holds.open("b", timeout_ms=10_000) == 1_500
    assert holds.safe_time(1_499) == 999, "an open hold keeps the safe time below its start"
    assert holds.open("b", timeout_ms=10_000, start_ms=900) == 900, "a writer lowers a start to its smallest"
    assert holds.open("b", timeout_ms=10_000, start_ms=1_200) == 900, "a start is never raised"
    assert holds.safe_time(1_499) == 899
    holds.close("b", release_after_ms=2_000)
    with pytest.raises(lakelog.BarrierHoldError, match="tablet server 1: barrier hold b is not open"):
        holds.check("b")
    holds.close("a", release_after_ms=1_700)
    clock.now = 1_701
    assert holds.safe_time(1_700) == 899, "b forbids [900, 2000)"
    clock.now = 2_001
    assert holds.safe_time(2_000) == 2_000 and len(holds) == 0, "both are passed and forgotten"


def test_a_closed_hold_is_not_split_by_a_later_hold() -> None:
    """One server, two writers: h1's writes are stamped 101 and 105, h2 opened at 102 in between.
    When h1 closes, h2 alone would allow 101, between h1's two writes; h1's interval does not."""
    clock = ManualClock(100)
    holds = BarrierHolds(clock, "tablet server 1")
    holds.open("h1", timeout_ms=10_000)
    clock.now = 102
    holds.open("h2", timeout_ms=10_000)
    clock.now = 106
    holds.close("h1", release_after_ms=105)
    assert holds.safe_time(105) == 99
    holds.close("h2", release_after_ms=103)
    assert holds.safe_time(105) == 105, "both closed and passed: the safe time moves on"
    assert len(holds) == 0


def test_an_unclosed_hold_expires_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(1_000)
    holds = BarrierHolds(clock, "tablet server 7")
    holds.open("stuck", timeout_ms=500)
    clock.now = 1_499
    holds.check("stuck")
    clock.now = 1_500
    assert holds.safe_time(1_499) == 1_499
    assert "tablet server 7: barrier hold stuck expired unclosed at its timeout" in caplog.text
    with pytest.raises(lakelog.BarrierHoldError, match="stuck is not open .*expired"):
        holds.close("stuck", 1_400)
    holds.open("late", timeout_ms=500)
    holds.close("late", release_after_ms=10**15)  # a bad release time cannot hold the barrier forever
    assert holds.safe_time(1_999) == 1_499
    clock.now = 2_000
    assert holds.safe_time(1_999) == 1_999


@pytest.mark.parametrize(
    "hold_id, timeout_ms, start_ms, message",
    [
        ("", 1000, 0, "a barrier hold id needs 1 to 128 characters"),
        ("x" * 129, 1000, 0, "a barrier hold id needs 1 to 128 characters"),
        ("h", 0, 0, "barrier hold h: timeout 0 ms is not within"),
        ("h", 16 * 60 * 1000, 0, "barrier hold h: timeout 960000 ms is not within"),
        ("h", 1000, -5, "barrier hold h: start -5 is negative"),
    ],
)
def test_bad_hold_requests_are_refused_by_name(hold_id: str, timeout_ms: int, start_ms: int, message: str) -> None:
    with pytest.raises(lakelog.InvalidRequestError, match=message):
        BarrierHolds(ManualClock(1), "tablet server 1").open(hold_id, timeout_ms, start_ms)


@pytest.fixture
def skewed_cluster(tmp_path: Path) -> Iterator[ServerProcess]:
    """A coordinator and two tablet servers, server 1's clock SKEW_MS ahead, server 2's behind."""
    coordinator = ServerProcess({"data.dir": str(tmp_path / "c"), "server.port": 0}, ("coordinator",)).start()
    skews = {1: SKEW_MS, 2: -SKEW_MS}
    tablets = [
        ServerProcess(
            {"data.dir": str(tmp_path / f"t{i}"), "server.port": 0, "coordinator.address": coordinator.address, "tablet-server.id": i},
            ("tablet-server",),
            clock=lambda skew=skews[i]: wall_clock_ms() + skew,
        ).start()
        for i in (1, 2)
    ]
    yield coordinator
    for process in [*tablets, coordinator]:
        process.stop(0)


def _write_pairs(conn: lakelog.Connection, tables: list[lakelog.Table], buckets: list[int], held: bool) -> tuple[list[int], list[tuple[int, int]]]:
    """PAIRS pairs, the left half on the server ahead, acknowledged before the right half goes to the
    server behind (so the right half is stamped earlier); held, in three groups with a pause between
    them longer than the skew. Returns the barriers a tiering round would
    take (internal_admin.barrier_safe_time) at every point of the writes, and each pair's two commit timestamps."""
    paths = [table.path for table in tables]
    barriers: list[int] = []
    stamps = []

    def sample() -> None:
        time.sleep(0.002)  # a round a moment later: the clocks have moved past the last stamps
        barriers.append(conn.internal_admin.barrier_safe_time(paths))

    for pair in range(PAIRS):
        if held and pair and pair % (PAIRS // 3) == 0:
            time.sleep((2 * SKEW_MS + 100) / 1000)  # a gap in the writes: the chain of overlapping holds ends
        acks: list[lakelog.AppendAck] = []
        hold = conn.open_barrier_hold() if held else None
        sample()
        for table, bucket in zip(tables, buckets):
            with table.new_append().create_writer(on_ack=acks.append, hold=hold) as writer:
                writer.append_arrow(order_rows(pair, 1), bucket=bucket)
            sample()
        if hold is not None:
            hold.close()
            sample()
        stamps.append((acks[0].commit_timestamp, acks[1].commit_timestamp))
    return barriers, stamps


def _split_pairs(barriers: list[int], stamps: list[tuple[int, int]]) -> int:
    """How many (barrier, pair) combinations a cut at the barrier would split."""
    return sum((left <= barrier) != (right <= barrier) for barrier in barriers for left, right in stamps)


def test_no_barrier_splits_a_held_pair_across_servers_with_skewed_clocks(skewed_cluster: ServerProcess) -> None:
    with lakelog.connect(skewed_cluster.address) as conn:
        tables = [create_table(conn, name, buckets=2) for name in ("left", "right")]
        paths = [table.path for table in tables]
        leaders = [conn.admin.describe_buckets(path) for path in paths]
        # the left half on server 1 (ahead), the right half on server 2 (behind)
        buckets = [next(b for b, info in leaders[0].items() if info.leader == 1), next(b for b, info in leaders[1].items() if info.leader == 2)]

        barriers, stamps = _write_pairs(conn, tables, buckets, held=False)
        assert all(right < left for left, right in stamps), "the right halves are stamped earlier (server 2 is behind)"
        assert _split_pairs(barriers, stamps) > 0, "without holds, skewed clocks let a barrier split a pair"

        barriers, stamps = _write_pairs(conn, tables, buckets, held=True)
        assert _split_pairs(barriers, stamps) == 0, "a barrier fell between the two halves of a held pair"
        assert barriers == sorted(barriers), "the barrier never goes back"
        passed = {sum(max(pair) <= barrier for pair in stamps) for barrier in barriers}
        assert {PAIRS // 3, 2 * PAIRS // 3} <= passed, "while writers hold, the barrier passes whole pairs at each gap"
        final = conn.internal_admin.barrier_safe_time(paths)
        # the holds overlap (skew makes each one's [start, last stamp) 600 ms long): the barrier passes them
        # all once server 2's clock has passed the last stamp
        deadline = wall_clock_ms() + 10_000
        while final < max(max(pair) for pair in stamps) and wall_clock_ms() < deadline:
            final = conn.internal_admin.barrier_safe_time(paths)
        assert final >= max(max(pair) for pair in stamps)


def test_a_lost_hold_fails_the_writer_loudly_and_the_server_keeps_serving(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory(**{"metrics.port": 0})
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, "held", buckets=1)
        hold = conn.open_barrier_hold(timeout_ms=300)
        assert conn.internal_admin.barrier_safe_time([table.path]) == hold.start - 1, "an open hold holds the server time back"
        assert Scrape(server)("lakelog_barrier_holds") == 1
        writer = table.new_append().create_writer(hold=hold)
        writer.append_arrow(order_rows(0, 5))
        writer.flush()
        # the hold expires; the next write under it, and its close, say so
        deadline = wall_clock_ms() + 10_000
        while conn.internal_admin.barrier_safe_time([table.path]) < hold.start and wall_clock_ms() < deadline:
            time.sleep(0.02)
        assert Scrape(server)("lakelog_barrier_holds") == 0
        writer.append_arrow(order_rows(5, 5))
        with pytest.raises(lakelog.BarrierHoldError, match=f"tablet server 0: barrier hold {hold.hold_id} is not open"):
            writer.flush()
        with pytest.raises(lakelog.BarrierHoldError, match=hold.hold_id):
            hold.close()
        with pytest.raises(lakelog.BarrierHoldError, match="is closed"):
            table.new_append().create_writer(hold=hold)
        # nothing acknowledged is lost, and the server keeps serving writes without a hold
        with table.new_append().create_writer() as plain:
            plain.append_arrow(order_rows(10, 5))
        assert conn.admin.list_offsets(table.path, spec=lakelog.OffsetSpec.latest()) == {0: 10}

        stub = TabletServiceStub(grpc.insecure_channel(server.address))
        with pytest.raises(grpc.RpcError) as refused:
            stub.OpenBarrierHold(pb.OpenBarrierHoldRequest(hold_id="", timeout_ms=1000), timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "a barrier hold id needs 1 to 128 characters" in refused.value.details()
        answer = stub.ProduceLog(
            pb.ProduceLogRequest(table_id=table.info.table_id, buckets_req=[pb.PbProduceLogReqForBucket(bucket_id=0, records=b"")], hold_id="nobody"),
            timeout=10,
        )
        assert answer.buckets_resp[0].error_code == lakelog.BarrierHoldError.code
        assert "barrier hold nobody is not open" in answer.buckets_resp[0].error_message
