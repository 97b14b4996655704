"""Consumer groups through the public API on a real server (docs/contract.md, "Consumer groups"):
admin and CLI (list, describe with members, buckets, commits and lag, offsets, reset refused while
members live), the lag metric and the status page, the reset policy (no commit, a committed offset
no tier holds), and the asyncio scanner as a member."""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.request
from typing import Any, Callable

import pyarrow as pa
import pytest

import lakelog
import lakelog.aio
from lakelog.cli.main import main as cli
from lakelog.server.server_process import ServerProcess
from tests.harness.lake_tier import expire_remote
from tests.harness.tables import ORDERS_SCHEMA, order_rows
from tests.harness.waiting import wait_until
from tests.harness.metrics_scrape import Scrape
from tests.harness.browser import browser  # noqa: F401 - the page's browser fixture

PATH = lakelog.TablePath("shop", "events")
FAST = {"client.scanner.group.session-timeout": "2s"}


def keyed_table(conn: lakelog.Connection, buckets: int = 4, properties: dict[str, str] | None = None) -> lakelog.Table:
    conn.admin.create_database("shop", ignore_if_exists=True)
    conn.admin.create_table(PATH, lakelog.TableDescriptor(ORDERS_SCHEMA, buckets, properties or {}, bucket_keys=["id"]))
    return conn.get_table(PATH)


def produce(table: lakelog.Table, start: int, count: int) -> None:
    with table.new_append().create_writer() as writer:
        writer.append_arrow(order_rows(start, count))
        writer.flush()


def poll_all(scanners: list[lakelog.LogScanner], count: int) -> list[Any]:
    """Poll every scanner in turn until together they returned ``count`` records."""
    got: list[Any] = []

    def more() -> bool:
        for scanner in scanners:
            got.extend(scanner.poll(timeout_ms=100))
        return len(got) >= count

    wait_until(more, f"{count} records polled")
    return got


def run_cli(capsys: pytest.CaptureFixture[str], server: ServerProcess, *args: str) -> tuple[int, str, str]:
    code = cli([*args, "--bootstrap", server.address])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_admin_cli_metric_and_status_page_show_members_commits_and_lag(
    server_factory: Callable[..., ServerProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    server = server_factory(**{"metrics.port": 0})
    with lakelog.connect(server.address, FAST) as one, lakelog.connect(server.address, FAST) as two:
        table = keyed_table(one)
        produce(table, 0, 400)
        first = table.new_scan().create_log_scanner(group="g")
        second = two.get_table(PATH).new_scan().create_log_scanner(group="g")
        seen: dict[tuple[int, int], Any] = {}

        def poll_both() -> None:
            for scanner in (first, second):
                seen.update({(r.bucket, r.offset): r for r in scanner.poll(timeout_ms=100)})

        wait_until(lambda: poll_both() or len(first.assignment()) == len(second.assignment()) == 2, "two members hold two buckets each")
        assert first.assignment() | second.assignment() == {0, 1, 2, 3}
        wait_until(lambda: poll_both() or len(seen) == 400, "every record polled")
        first.commit()
        second.commit()
        positions = {**first.positions(), **second.positions()}
        assert sum(positions.values()) == 400
        assert one.admin.list_group_offsets("g", PATH) == positions
        produce(table, 400, 100)  # not read: the group's lag

        described = one.admin.describe_group("g")
        assert len(described.members) == 2
        assert {m.member_id for m in described.members} == {s.member_id for s in described.buckets}
        by_bucket = {state.bucket.bucket: state for state in described.buckets}
        ends = one.admin.list_offsets(PATH, spec=lakelog.OffsetSpec.latest())
        for bucket, state in by_bucket.items():
            assert (state.committed, state.high_watermark, state.lag) == (positions[bucket], ends[bucket], ends[bucket] - positions[bucket])
        assert described.lag == 100
        assert [(g.group_id, g.members, g.lag) for g in one.admin.list_groups()] == [("g", 2, 100)]
        assert Scrape(server)("lakelog_group_lag", group="g", table=str(PATH)) == 100

        status = json.loads(urllib.request.urlopen(server.status_url + ".json", timeout=10).read())
        [group] = status["groups"]
        assert (group["group"], group["members"], group["lag"]) == ("g", 2, 100)
        assert {(b["bucket"], b["committed"], b["lag"]) for b in group["buckets"]} == {(b, positions[b], ends[b] - positions[b]) for b in range(4)}

        code, out, _ = run_cli(capsys, server, "group", "list")
        assert code == 0 and "g" in out and "100" in out
        code, out, _ = run_cli(capsys, server, "group", "describe", "g", "--output", "json")
        shown = json.loads(out)
        assert code == 0 and shown["lag"] == 100 and len(shown["members"]) == 2
        assert sorted((b["bucket"], b["committed"], b["lag"]) for b in shown["buckets"]) == sorted(
            (str(b), positions[b], ends[b] - positions[b]) for b in range(4)
        )
        code, out, _ = run_cli(capsys, server, "group", "offsets", "g", str(PATH), "--output", "json")
        assert code == 0 and {int(row["bucket"]): row["offset"] for row in json.loads(out)} == positions

        with pytest.raises(lakelog.GroupNotEmptyError, match="2 live member"):
            one.admin.reset_group_offsets("g", PATH, spec=lakelog.OffsetSpec.earliest())
        code, _, err = run_cli(capsys, server, "group", "reset", "g", str(PATH), "--earliest")
        assert code == 1 and "GroupNotEmptyError" in err
        assert one.admin.list_group_offsets("g", PATH) == positions, "a refused reset changes nothing"

        first.close()
        second.close()
        assert one.admin.describe_group("g").members == ()
        code, out, _ = run_cli(capsys, server, "group", "reset", "g", str(PATH), "--latest", "--output", "json")
        assert code == 0 and {int(row["bucket"]): row["offset"] for row in json.loads(out)} == ends
        assert one.admin.list_group_offsets("g", PATH) == ends
        assert one.admin.describe_group("g").lag == 0
        again = table.new_scan().create_log_scanner(group="g")
        produce(table, 500, 10)
        assert sorted(r.row["id"] for r in poll_all([again], 10)) == list(range(500, 510)), "a reset group starts where it was set"
        again.close()


def test_the_status_page_shows_groups_and_their_lag(server_factory: Callable[..., ServerProcess], browser: Any) -> None:  # noqa: F811
    server = server_factory(**{"metrics.port": 0})
    with lakelog.connect(server.address, FAST) as conn:
        table = keyed_table(conn, buckets=2)
        produce(table, 0, 50)
        with table.new_scan().create_log_scanner(group="shown") as scanner:
            poll_all([scanner], 50)
            scanner.commit()
            produce(table, 50, 7)
            browser.get(server.status_url)
            rows = wait_until(lambda: browser.find_elements("css selector", 'tr[data-group="shown"]'), "the group's row on the page", 30)
            assert "1 member" in rows[0].text and rows[0].text.rstrip().endswith("7")
            buckets = browser.find_elements("css selector", 'tr[data-group-bucket^="shown:"]')
            assert len(buckets) == 2 and all(str(PATH) in row.text for row in buckets)


def test_without_a_commit_a_bucket_starts_by_the_reset_policy_and_says_so(server: ServerProcess, caplog: pytest.LogCaptureFixture) -> None:
    with lakelog.connect(server.address, {**FAST, "client.scanner.group.reset": "latest"}) as conn:
        table = keyed_table(conn, buckets=2)
        produce(table, 0, 100)
        with caplog.at_level(logging.INFO, logger="lakelog.client.group"):
            scanner = table.new_scan().create_log_scanner(group="late")
            wait_until(lambda: scanner.poll(timeout_ms=100) is not None and scanner.assignment() == {0, 1}, "the member holds both buckets")
        assert "starts at" in caplog.text and "(latest): it has no committed offset" in caplog.text
        produce(table, 100, 10)
        assert sorted(r.row["id"] for r in poll_all([scanner], 10)) == list(range(100, 110))
        scanner.close()
    with lakelog.connect(server.address, {**FAST, "client.scanner.group.reset": "error"}) as conn:
        scanner = conn.get_table(PATH).new_scan().create_log_scanner(group="strict")
        with pytest.raises(lakelog.OffsetOutOfRangeError, match="group strict: table .* bucket .* no committed offset"):
            wait_until(lambda: scanner.poll(timeout_ms=100) and False, "the poll raises")
        scanner.close()


def test_a_committed_offset_no_tier_holds_any_more_starts_by_the_reset_policy(
    server_factory: Callable[..., ServerProcess], caplog: pytest.LogCaptureFixture
) -> None:
    server = server_factory(**{"log.segment.max-bytes": "64kb", "remote.log.task-interval": "1h"})
    with lakelog.connect(server.address, FAST) as conn:
        table = keyed_table(conn, buckets=1, properties={"table.log.ttl": "1h", "table.log.tiered.local-segments": "1"})
        for start in range(0, 20_000, 2000):
            produce(table, start, 2000)
        for group in ("old", "older"):
            conn.admin.reset_group_offsets(group, PATH, spec=lakelog.OffsetSpec.earliest())
            assert conn.admin.list_group_offsets(group, PATH) == {0: 0}
        assert server.tablet is not None
        server.tablet.remote.run_once()
        assert expire_remote(server.tablet.remote, days=2).expired > 0
        earliest = conn.admin.list_offsets(PATH, spec=lakelog.OffsetSpec.earliest())[0]
        assert earliest > 0
        with caplog.at_level(logging.INFO, logger="lakelog.client.group"):
            scanner = table.new_scan().create_log_scanner(group="old")
            first = poll_all([scanner], 1)[0]
        assert first.offset == earliest
        assert f"committed offset 0 is outside [{earliest}, 20000]" in caplog.text
        scanner.close()
    with lakelog.connect(server.address, {**FAST, "client.scanner.group.reset": "error"}) as conn:
        scanner = conn.get_table(PATH).new_scan().create_log_scanner(group="older")
        with pytest.raises(lakelog.OffsetOutOfRangeError, match=f"group older: table .* bucket 0 cannot start: its committed offset 0 is outside \\[{earliest}, 20000\\]"):
            wait_until(lambda: scanner.poll(timeout_ms=100) and False, "the poll raises")
        scanner.close()


def test_a_member_given_many_partitions_lists_their_offsets_in_one_call_per_leader_and_end(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """A rebalance that hands over the buckets of 12 partitions asks their earliest and latest
    offsets in two ListOffsets in all, whether the buckets start at commits or by the reset policy."""
    server = server_factory(**{"metrics.port": 0})
    schema = pa.schema([("id", pa.int64()), ("dt", pa.string())])
    days = [f"d{n:02d}" for n in range(12)]

    def write(start: int) -> None:
        ids = range(start, start + 10 * len(days))
        with table.new_append().create_writer() as writer:
            writer.append_arrow(pa.table({"id": list(ids), "dt": [days[i % len(days)] for i in ids]}, schema=schema))

    with lakelog.connect(server.address, FAST) as conn:
        conn.admin.create_database("shop", ignore_if_exists=True)
        conn.admin.create_table(PATH, lakelog.TableDescriptor(schema, 2, partition_keys=["dt"], bucket_keys=["id"]))
        table = conn.get_table(PATH)
        write(0)
        committed = conn.admin.reset_group_offsets("resumed", PATH, spec=lakelog.OffsetSpec.latest())
        assert len(committed) == 2 * len(days)
        write(1000)
        calls = lambda: Scrape(server)("lakelog_rpc_duration_seconds_count", method="ListOffsets")  # noqa: E731
        for group, expected in (("resumed", set(range(1000, 1120))), ("fresh", set(range(120)) | set(range(1000, 1120)))):
            before = calls()
            scanner = table.new_scan().create_log_scanner(group=group)
            assert {r.row["id"] for r in poll_all([scanner], len(expected))} == expected
            assert calls() == before + 2, f"group {group}: one ListOffsets per end, not per partition"
            scanner.close()


def test_the_asyncio_scanner_joins_a_group_commits_and_leaves(server: ServerProcess) -> None:
    with lakelog.connect(server.address) as conn:
        produce(keyed_table(conn), 0, 200)

    async def consume() -> tuple[set[int], dict[Any, int], set[Any]]:
        async with await lakelog.aio.connect(server.address, FAST) as aconn:
            table = await aconn.get_table(PATH)
            scanner = table.new_scan().create_log_scanner(group="async")
            ids: set[int] = set()
            while len(ids) < 200:
                ids |= {record.row["id"] for record in await scanner.poll(timeout_ms=200)}
            await scanner.commit()
            held = scanner.assignment()
            positions = scanner.positions()
            await scanner.close()
            return ids, positions, held

    ids, positions, held = asyncio.run(consume())
    assert ids == set(range(200)) and held == {0, 1, 2, 3}
    with lakelog.connect(server.address) as conn:
        assert conn.admin.list_group_offsets("async", PATH) == positions
        assert conn.admin.describe_group("async").members == ()
