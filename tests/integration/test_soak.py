"""A bounded soak: N producers and M consumers on loopback for a fixed time (and at most a fixed
number of records), then a check that every consumer saw every acknowledged record exactly once.

It reports throughput and p99 poll latency (printed, and as JUnit properties); it asserts no time.
``LAKELOG_SOAK_SECONDS`` lengthens it.
"""

from __future__ import annotations

import os
import statistics
import threading
import time

import lakelog
from tests.harness.tables import create_table, order_rows

SECONDS = float(os.environ.get("LAKELOG_SOAK_SECONDS", "6"))
MAX_RECORDS_PER_PRODUCER = 2_000_000
PRODUCERS = 3
CONSUMERS = 2
BUCKETS = 4


def test_soak_nothing_lost_or_duplicated(server, record_property) -> None:
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, buckets=BUCKETS)
    stop = threading.Event()
    acked: list[list[int]] = [[] for _ in range(PRODUCERS)]
    failures: list[BaseException] = []

    def produce(n: int) -> None:
        try:
            with lakelog.connect(server.address) as c:
                writer = c.get_table(table.path).new_append().create_writer()
                next_id = n * MAX_RECORDS_PER_PRODUCER
                end = next_id + MAX_RECORDS_PER_PRODUCER
                while not stop.is_set() and next_id < end:
                    count = min(1000, end - next_id)
                    writer.append_arrow(order_rows(next_id, count))
                    writer.flush()
                    acked[n].extend(range(next_id, next_id + count))
                    next_id += count
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failures.append(exc)

    seen: list[list[int]] = [[] for _ in range(CONSUMERS)]
    latencies: list[list[float]] = [[] for _ in range(CONSUMERS)]
    done_producing = threading.Event()
    final_total: list[int] = []

    def consume(n: int) -> None:
        try:
            with lakelog.connect(server.address) as c:
                scanner = c.get_table(table.path).new_scan().project(["id"]).create_log_scanner()
                scanner.subscribe_from_beginning()
                deadline = time.monotonic() + SECONDS + 120
                while time.monotonic() < deadline:
                    started = time.perf_counter()
                    polled = scanner.poll_arrow(timeout_ms=200)
                    latencies[n].append(time.perf_counter() - started)
                    seen[n].extend(polled.column("id").to_pylist())
                    if done_producing.is_set() and len(seen[n]) >= final_total[0]:
                        return
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(PRODUCERS)]
    threads += [threading.Thread(target=consume, args=(n,)) for n in range(CONSUMERS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    time.sleep(SECONDS)
    stop.set()
    for thread in threads[:PRODUCERS]:
        thread.join()
    elapsed = time.monotonic() - started
    with lakelog.connect(server.address) as conn:
        final_total.append(sum(conn.admin.list_offsets(table.path).values()))
    done_producing.set()
    for thread in threads[PRODUCERS:]:
        thread.join()

    assert not failures, failures
    produced = sorted(i for ids in acked for i in ids)
    assert final_total[0] == len(produced)
    for ids in seen:
        assert len(ids) == len(produced), "a consumer missed or repeated records"
        assert sorted(ids) == produced
    polls = sorted(latency for per_consumer in latencies for latency in per_consumer)
    p99_ms = polls[int(len(polls) * 0.99) - 1] * 1000
    rate = len(produced) / elapsed
    record_property("records", len(produced))
    record_property("produce_records_per_s", round(rate))
    record_property("poll_p99_ms", round(p99_ms, 1))
    print(
        f"\nsoak: {len(produced):,} records by {PRODUCERS} producers in {elapsed:.1f} s ({rate:,.0f}/s), "
        f"read by {CONSUMERS} consumers each; {len(polls)} polls, p50 {statistics.median(polls) * 1000:.1f} ms, "
        f"p99 {p99_ms:.1f} ms"
    )
