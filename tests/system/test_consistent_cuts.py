"""Consistent cuts (docs/contract.md, "Tiering, consistent cuts and cursors"): two lake-enabled tables written together by one producer in
pairs (a pair's two rows share a key, the left half acknowledged before the right one is sent, both
under one barrier hold), tiered in rounds while the producer runs. At every barrier both tables
committed, their Iceberg snapshots are exactly the two logs at that instant, and joined on the key
every pair is complete; the tables' plain latest snapshots can be mid-pair."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

import lakelog
from lakelog.lake.snapshot_summary import BARRIER, barrier_snapshots
from lakelog.server.server_process import ServerProcess
from lakelog.log_ranges import barrier_ends, bucket_ranges
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.harness.lake_tier import LAKE_TABLE, lake_table
from tests.harness.tables import create_table, log_rows, order_rows

BUCKETS = 2
PAIRS_PER_BATCH = 50


def _write_pairs(conn: lakelog.Connection, tables: list[lakelog.Table], first: int) -> None:
    """One pair batch under one barrier hold: the left halves are acknowledged (and stamped) before
    the right ones exist, and no barrier falls between them."""
    batch = order_rows(first, PAIRS_PER_BATCH)
    with conn.open_barrier_hold() as hold:
        for table in tables:
            with table.new_append().create_writer(hold=hold) as writer:
                writer.append_arrow(batch, bucket=(first // PAIRS_PER_BATCH) % BUCKETS)


def _keys(server: ServerProcess, path: lakelog.TablePath, snapshot_id: int | None = None) -> set[int]:
    table = lake_table(server, path)
    snapshot_id = snapshot_id if snapshot_id is not None else table.current_snapshot().snapshot_id
    return set(table.scan(snapshot_id=snapshot_id, selected_fields=("id",)).to_arrow().column("id").to_pylist())


def _assert_cut(
    server: ServerProcess, cut: dict[lakelog.TablePath, int], barrier: int, logs: list[pa.Table], singles: range = range(0)
) -> int:
    """The snapshots hold exactly the records each log had stamped at or before ``barrier``, and every
    pair is complete (``singles``: keys written to the left table alone). Returns how many pairs the cut holds."""
    left, right = (_keys(server, path, snapshot_id) for path, snapshot_id in cut.items())
    for keys, log in zip((left, right), logs):
        stamped = pc.less_equal(log.column("__timestamp"), barrier)
        assert keys == set(log.filter(stamped).column("id").to_pylist()), f"not the log at barrier {barrier}"
    assert left - set(singles) == right, f"pairs missing a partner at {cut}: {sorted((left - set(singles)) ^ right)[:10]}"
    return len(right)


def test_snapshots_at_a_common_barrier_hold_whole_pairs(spark: Any, server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        paths = [create_table(conn, name, buckets=BUCKETS, properties=LAKE_TABLE).path for name in ("left", "right")]
        tables = [conn.get_table(path) for path in paths]
        written = 0
        stop = threading.Event()

        def produce() -> None:
            nonlocal written
            while not stop.is_set():
                _write_pairs(conn, tables, written)
                written += PAIRS_PER_BATCH

        producer = threading.Thread(target=produce, name="pair producer")
        cuts: list[dict[lakelog.TablePath, int]] = []
        with TieringJob(TieringOptions(server.address, tables=tuple(paths)), spark=spark) as job:
            producer.start()
            try:
                for _ in range(4):
                    time.sleep(0.3)
                    report = job.run_round()
                    assert report.failed == {} and report.barrier > 0
                    cuts.append(conn.admin.get_consistent_lake_snapshots(paths))
            finally:
                stop.set()
                producer.join()
            assert len({tuple(cut.values()) for cut in cuts}) > 1, "the cut moved forward round by round"
            logs = [log_rows(server.address, path) for path in paths]
            # Every barrier both tables committed is a cut, not only the one the admin picks.
            by_table = [barrier_snapshots(lake_table(server, path)) for path in paths]
            common = set(by_table[0]) & set(by_table[1])
            assert len(common) >= 4
            for cut in cuts:
                barrier = next(b for b in common if by_table[0][b] == cut[paths[0]])
                assert cut == {path: found[barrier] for path, found in zip(paths, by_table)}
            whole = [_assert_cut(server, {p: f[b] for p, f in zip(paths, by_table)}, b, logs) for b in sorted(common)]
            assert whole == sorted(whole) and whole[-1] > 0

            # A pair batch tiered on the right alone: the latest snapshots lose a partner, the cut does not.
            _write_pairs(conn, tables, written)
            time.sleep(0.01)  # past the batch's commit timestamp: the barrier is the servers' clock minus 1 ms
            with TieringJob(TieringOptions(server.address, tables=(paths[1],)), spark=spark) as right_only:
                assert right_only.run_round().records > 0
            assert _keys(server, paths[1]) - _keys(server, paths[0]), "the latest snapshots are mid-pair"
            cut = conn.admin.get_consistent_lake_snapshots(paths)
            logs = [log_rows(server.address, path) for path in paths]
            barrier = int(lake_table(server, paths[0]).snapshot_by_id(cut[paths[0]]).summary[BARRIER])
            _assert_cut(server, cut, barrier, logs)

            # An idle table does not hold the cut back: only the left table gets rows, and the round
            # commits the right one at the same barrier with a snapshot without files.
            with tables[0].new_append().create_writer() as left:
                left.append_arrow(order_rows(written + PAIRS_PER_BATCH, PAIRS_PER_BATCH), bucket=0)
            time.sleep(0.01)
            report = job.run_round()
            idle = next(t for t in report.tables if t.path == paths[1])
            assert idle.records == 0 and idle.snapshot_id is not None
            logs = [log_rows(server.address, path) for path in paths]
            final = conn.admin.get_consistent_lake_snapshots(paths)
            assert final[paths[1]] == idle.snapshot_id
            barrier = int(lake_table(server, paths[0]).snapshot_by_id(final[paths[0]]).summary[BARRIER])
            assert barrier == report.barrier
            singles = range(written + PAIRS_PER_BATCH, written + 2 * PAIRS_PER_BATCH)
            assert _assert_cut(server, final, barrier, logs, singles) == written + PAIRS_PER_BATCH
            assert len(_keys(server, paths[0], final[paths[0]])) == written + 2 * PAIRS_PER_BATCH

            # A round where no table has anything new commits nothing: the last cut still stands.
            time.sleep(0.01)
            assert all(t.snapshot_id is None for t in job.run_round().tables)
            assert conn.admin.get_consistent_lake_snapshots(paths) == final


def test_server_time_is_passed_and_later_appends_are_stamped_after_it(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, "plain", buckets=BUCKETS)
        before = time.time_ns() // 1_000_000
        barrier = conn.internal_admin.barrier_safe_time([table.path])
        assert before - 1 <= barrier < time.time_ns() // 1_000_000
        with table.new_append().create_writer() as writer:
            writer.append_arrow(order_rows(0, 10))
        stamps = log_rows(server.address, table.path).column("__timestamp").to_pylist()
        assert min(stamps) > barrier


def test_a_round_stops_at_the_barrier_and_says_when_a_budget_cut_it_short() -> None:
    high_watermarks = {0: 100, 1: 50, 2: 7}
    ends = barrier_ends(high_watermarks, {0: 80, 1: 60, 2: 7})  # bucket 1: ListOffsets past the high watermark read before
    assert ends == {0: 80, 1: 50, 2: 7}
    starts = {0: 10, 1: 0, 2: 7}
    assert bucket_ranges(starts, ends, None).complete
    assert not bucket_ranges(starts, ends, 100).complete
