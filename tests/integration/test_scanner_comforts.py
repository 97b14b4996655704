"""What Kafka and pyfluss consumers expect of a scanner, on a real server: a cap on the records of
one poll that loses and repeats nothing, resuming from checkpointed positions, starting at the
end, and ``for record in scanner``."""

from __future__ import annotations

from collections import defaultdict

import pytest

import lakelog
from tests.harness.tables import create_table, order_rows

BUCKETS = 3
PER_BUCKET = 400


@pytest.fixture
def table(conn: lakelog.Connection) -> lakelog.Table:
    table = create_table(conn, buckets=BUCKETS)
    with table.new_append().create_writer() as writer:
        for bucket in range(BUCKETS):
            writer.append_arrow(order_rows(bucket * PER_BUCKET, PER_BUCKET), bucket=bucket)
    return table


def offsets_by_bucket(records: list[lakelog.ScanRecord]) -> dict[int, list[int]]:
    seen: dict[int, list[int]] = defaultdict(list)
    for record in records:
        seen[record.bucket].append(record.offset)
    return dict(seen)


def test_max_poll_records_caps_each_poll_and_loses_nothing(server, table: lakelog.Table) -> None:
    with lakelog.connect(server.address, {"client.scanner.max-poll-records": 100}) as conn:
        with conn.get_table(table.path).new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            first = scanner.poll(timeout_ms=5000)
            assert len(first) == 100
            assert scanner.positions() == {b: len(first.records(b)) for b in range(BUCKETS)}, "positions follow what was returned"
            polls = [first]
            while polls[-1]:
                polls.append(scanner.poll(timeout_ms=1000))
    assert all(0 < len(records) <= 100 for records in polls[:-1])
    # The cap is shared by the buckets a poll finds records of (a server's buckets are fetched in
    # two, so which have arrived is timing): even shares, but for a bucket reaching its end.
    for poll in polls[:-1]:
        shares = [len(poll.records(b)) for b in poll.buckets() if poll.records(b)[-1].offset < PER_BUCKET - 1]
        assert max(shares, default=0) - min(shares, default=0) <= 1, f"uneven shares {shares} of one poll"
    assert any(len(poll.buckets()) > 1 for poll in polls), "no poll shared its cap"
    records = [record for records in polls for record in records]
    assert offsets_by_bucket(records) == {b: list(range(PER_BUCKET)) for b in range(BUCKETS)}, "no gap, no duplicate"


def test_for_record_in_scanner_reads_what_there_is_and_ends(table: lakelog.Table) -> None:
    with table.new_scan().create_log_scanner() as scanner:
        scanner.subscribe_from_beginning()
        records = list(scanner)
        assert offsets_by_bucket(records) == {b: list(range(PER_BUCKET)) for b in range(BUCKETS)}
        assert sorted(r.row["id"] for r in records) == list(range(BUCKETS * PER_BUCKET))
        assert list(scanner.iterate(timeout_ms=100)) == [], "at the end, iteration ends"


def test_resume_from_checkpointed_positions(table: lakelog.Table) -> None:
    with table.new_scan().create_log_scanner() as first:
        first.subscribe_buckets({0: 0, 2: 390})
        taken = list(first)
        checkpoint = first.positions()
    assert offsets_by_bucket(taken) == {0: list(range(PER_BUCKET)), 2: list(range(390, PER_BUCKET))}
    assert checkpoint == {0: PER_BUCKET, 2: PER_BUCKET}
    with table.new_append().create_writer() as writer:
        writer.append_arrow(order_rows(5000, 3), bucket=2)
    with table.new_scan().create_log_scanner() as resumed:
        resumed.subscribe_buckets(checkpoint)
        assert [(r.bucket, r.offset, r.row["id"]) for r in resumed] == [(2, 400, 5000), (2, 401, 5001), (2, 402, 5002)]
        with pytest.raises(lakelog.UnknownBucketError):
            resumed.subscribe_buckets({7: 0})


def test_seek_to_end_reads_only_what_comes_next(table: lakelog.Table) -> None:
    with table.new_scan().create_log_scanner() as scanner:
        scanner.seek_to_end()
        assert scanner.positions() == {b: PER_BUCKET for b in range(BUCKETS)}
        assert len(scanner.poll(timeout_ms=200)) == 0
        with table.new_append().create_writer() as writer:
            writer.append_arrow(order_rows(9000, 2), bucket=1)
        assert [(r.bucket, r.offset) for r in scanner] == [(1, 400), (1, 401)]
        scanner.seek_to_end([1])
        assert scanner.positions()[1] == 402
