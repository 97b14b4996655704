"""Delivery reports are the application's: ``on_ack`` runs on the application's own calls, a report
that raises is logged and raised from ``flush()`` without losing a record or a later report, and a
writer left open when its connection closes fails what it holds, and its connection's sender ends quietly."""

from __future__ import annotations

import logging
import threading
from typing import Any, Iterator

import pyarrow as pa
import pytest

import lakelog
from lakelog.server.server_process import ServerProcess
from tests.harness.tables import create_table, order_rows
from tests.harness.waiting import wait_until

PARTITIONED = pa.schema([("dt", pa.string()), ("id", pa.int64())])


class Boom(Exception):
    pass


@pytest.fixture
def thread_failures(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[threading.ExceptHookArgs]]:
    """Exceptions that ended a thread (each would print a traceback)."""
    failures: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", failures.append)
    yield failures


def _partitioned(conn: lakelog.Connection) -> lakelog.Table:
    path = lakelog.TablePath("shop", "events")
    conn.admin.create_database("shop", ignore_if_exists=True)
    conn.admin.create_table(path, lakelog.TableDescriptor(PARTITIONED, 2, partition_keys=["dt"]))
    return conn.get_table(path)


def test_a_report_that_raises_is_logged_and_raised_from_flush_and_nothing_is_lost(
    conn: lakelog.Connection, caplog: pytest.LogCaptureFixture, thread_failures: list[Any]
) -> None:
    table = create_table(conn, buckets=3)
    served: list[lakelog.AppendAck] = []
    threads: set[threading.Thread] = set()

    def on_ack(ack: lakelog.AppendAck) -> None:
        served.append(ack)
        threads.add(threading.current_thread())
        if len(served) == 1:
            raise Boom("the application's report failed")

    writer = table.new_append().create_writer(on_ack=on_ack)
    for bucket in range(3):
        writer.append_arrow(order_rows(bucket * 10, 10), bucket=bucket)
    with caplog.at_level(logging.ERROR), pytest.raises(Boom, match="the application's report failed"):
        writer.flush()
    assert "on_ack of the writer of shop.orders raised" in caplog.text
    assert sorted(ack.bucket for ack in served) == [0, 1, 2], "every report is served, those after the failing one too"
    assert threads == {threading.current_thread()}, "reports run on the application's thread"
    writer.append_arrow(order_rows(30, 5), bucket=0)
    writer.flush()  # the failure was raised once; the writer goes on
    writer.close()
    assert len(served) == 4
    assert conn.admin.list_offsets(table.path) == {0: 15, 1: 10, 2: 10}
    assert not thread_failures


def test_a_partitioned_writer_serves_every_partitions_reports_and_raises_a_failing_one(conn: lakelog.Connection) -> None:
    table = _partitioned(conn)
    served: list[lakelog.AppendAck] = []

    def on_ack(ack: lakelog.AppendAck) -> None:
        served.append(ack)
        raise Boom(f"report {len(served)}")

    with table.new_append().create_writer(on_ack=on_ack) as writer:
        writer.append_arrow(pa.table({"dt": ["a", "b", "a"], "id": [1, 2, 3]}, schema=PARTITIONED), bucket=0)
        with pytest.raises(Boom, match="report 1"):
            writer.flush()
    assert sum(ack.record_count for ack in served) == 3
    assert {day: conn.admin.list_offsets(table.path, partition_name=day)[0] for day in "ab"} == {"a": 2, "b": 1}


def test_a_writer_left_open_when_its_connection_closes_fails_quietly(server: ServerProcess, thread_failures: list[Any]) -> None:
    conn = lakelog.connect(server.address, {"client.writer.linger": "100ms"})
    writer = create_table(conn, buckets=2).new_append().create_writer()
    senders = {thread for thread in threading.enumerate() if thread.name == "writer-sender"}
    assert senders, "the connection sends its writers' batches on a thread"
    writer.append({"id": 1, "name": "a", "amount": 1.0})
    conn.close()
    wait_until(lambda: not any(thread.is_alive() for thread in senders), "the connection's sender ended")
    with pytest.raises(lakelog.LakelogError, match="the connection is closed"):
        writer.flush()
    writer.close()
    assert not thread_failures
