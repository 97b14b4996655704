"""The coordinator's status page in a real browser: headless Chromium from Debian's packages
(``make test`` installs ``chromium`` and ``chromium-driver``), driven by selenium against a live
server whose log moves through remote storage and the lake. What is checked is what a person sees:
bars to scale of the high watermark, which grow as tiering runs while the page refreshes itself,
the lake's lag and the tiering job; and that the page, like the gRPC read calls, wants a token."""

from __future__ import annotations

import base64
import json
import secrets
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

import lakelog
from lakelog.metadata import BucketInfo, LakeBucketOffset, LakeSnapshot
from lakelog.security.tokens import hash_token
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from lakelog.server.status.cluster_status import ClusterStatus
from lakelog.server.status.lake_lag_history import HOUR_MS, LakeLagHistory
from tests.harness.browser import browser  # noqa: F401 - the page's browser fixture
from tests.harness.certificates import CertificateAuthority
from tests.harness.lake_tier import TIERED_TABLE, expire_remote
from tests.harness.server_roles import coordinator_apart, tablet_server
from tests.harness.tables import create_table, order_rows, produce_orders

SCREENSHOT = "status-page.png"
BUCKETS = 2
RECORDS = 24_000
TABLE = "shop.orders"
# The page refreshes every 3 s: a change must show within a few refreshes.
SEEN_WITHIN_S = 20


# One look at the table's buckets, taken in one script so that a refresh cannot land in between:
# per bucket its text and, per tier lane, where the bar lies as fractions of the lane's rendered
# width ([0, 0] when nothing is drawn) and the offsets label next to it.
_READ_BUCKETS = """
const rows = document.querySelectorAll(`.bucket[data-table="${arguments[0]}"]`);
return Array.from(rows, (row) => ({
  bucket: Number(row.dataset.bucket),
  text: row.innerText,
  tiers: Object.fromEntries(Array.from(row.querySelectorAll(".span"), (span) => {
    const lane = span.parentElement.getBoundingClientRect(), bar = span.getBoundingClientRect();
    const share = bar.width ? [(bar.left - lane.left) / lane.width, (bar.right - lane.left) / lane.width] : [0, 0];
    const label = row.querySelector(`.range[data-tier="${span.dataset.tier}"]`).innerText;
    return [span.dataset.tier, {share, label}];
  })),
}));
"""


class StatusView:
    """The page as a person reads it, through the rendered DOM."""

    def __init__(self, driver: WebDriver, url: str) -> None:
        self.driver = driver
        driver.get(url)
        self.wait_for(lambda: len(self.buckets()) == BUCKETS, "the table's buckets")

    def wait_for(self, condition: Callable[[], Any], what: str) -> Any:
        return WebDriverWait(self.driver, SEEN_WITHIN_S, poll_frequency=0.2).until(lambda _: condition(), f"never saw {what}")

    def buckets(self) -> dict[int, dict[str, Any]]:
        return {row["bucket"]: row for row in self.driver.execute_script(_READ_BUCKETS, TABLE)}

    def shares(self, tier: str) -> list[float]:
        """Per bucket, where the tier's bar ends, as a fraction of its lane."""
        return [row["tiers"][tier]["share"][1] for row in self.buckets().values()]

    def widths(self, tier: str) -> list[float]:
        """Per bucket, the tier's bar's width as a fraction of its lane."""
        return [row["tiers"][tier]["share"][1] - row["tiers"][tier]["share"][0] for row in self.buckets().values()]

    def text(self, selector: str) -> str:
        return str(self.driver.execute_script("return document.querySelector(arguments[0])?.innerText ?? ''", selector))


def _scale_errors(shown: dict[int, dict[str, Any]], described: dict[int, BucketInfo]) -> list[str]:
    """How the page differs from ``described``: each lane must span its tier's offsets over
    [0, high watermark) within a pixel or two, its label must say them, an empty tier shows nothing."""
    errors = []
    for bucket, info in described.items():
        if f"high watermark {info.high_watermark:,}" not in shown[bucket]["text"]:
            errors.append(f"bucket {bucket}: high watermark {info.high_watermark:,} not shown")
        ranges = {
            "lake": (info.lake_log_start_offset, info.lake_log_end_offset),
            "remote": (info.remote_log_start_offset, info.remote_log_end_offset),
            "local": (info.local_log_start_offset, info.high_watermark),
        }
        for tier, (start, end) in ranges.items():
            lane = shown[bucket]["tiers"][tier]
            if start < 0 or end <= start:
                expected: tuple[list[float], str] = ([0, 0], "—")
            else:
                expected = ([start / info.high_watermark, end / info.high_watermark], f"{start:,} – {end:,}")
            if lane["label"] != expected[1] or any(abs(a - b) > 0.01 for a, b in zip(lane["share"], expected[0])):
                errors.append(f"bucket {bucket} {tier}: shown {lane}, expected {expected}")
    return errors


def _wait_to_scale(view: StatusView, conn: lakelog.Connection, path: lakelog.TablePath) -> None:
    """Until the page shows what describe_buckets says now (the next refresh at the latest)."""
    errors: list[str] = []

    def matches() -> bool:
        errors[:] = _scale_errors(view.buckets(), conn.admin.describe_buckets(path))
        return not errors

    try:
        view.wait_for(matches, "bars to scale")
    except TimeoutException:
        raise AssertionError(f"the page never matched describe_buckets: {errors}") from None


def test_bars_grow_as_tiering_runs_without_a_reload(
    tiered_server: ServerProcess, browser: WebDriver, spark: Any, tmp_path: Path
) -> None:
    server = tiered_server
    assert server.tablet is not None
    with lakelog.connect(server.address) as conn:
        # Rolled segments in remote storage, the newest one on local disk only, nothing in the lake.
        table = create_table(conn, buckets=BUCKETS, properties=TIERED_TABLE)
        produce_orders(table, 0, RECORDS)
        assert server.tablet.remote.run_once().uploaded > 0

        view = StatusView(browser, server.status_url)
        assert browser.title == "lakelog status"
        assert "nothing in the lake yet" in view.text(f'section[data-table="{TABLE}"]')
        assert view.text("#jobs") == "no tiering job has reported yet"
        _wait_to_scale(view, conn, table.path)
        browser.execute_script("window.notReloaded = true")

        # A round limited to half the records: every lake bar appears, about half as wide as its lane.
        options = TieringOptions(server.address, tables=(table.path,), max_records_per_round=RECORDS // 2)
        with TieringJob(options, spark=spark) as job:
            assert job.run_round().records == RECORDS // 2
            half = view.wait_for(lambda: all(view.shares("lake")) and view.shares("lake"), "lake bars after the first round")
            assert min(half) < 0.99, "half the records: some lake bar is still short of the high watermark"
            _wait_to_scale(view, conn, table.path)
            job_row = view.text(f'tr[data-job="{job.commit_user}"]')
            assert TABLE in job_row and "ago" in job_row.split(TABLE)[1], "the job, its tables and its last barrier"
            lag = view.text(f'section[data-table="{TABLE}"] .lag .now')
            assert lag.startswith("lake lag ") and lag != "lake lag —"
            assert browser.find_elements(By.CSS_SELECTOR, f'section[data-table="{TABLE}"] .lag svg circle'), "the lag line ends at now"
            browser.save_screenshot(str(tmp_path / SCREENSHOT))

            # The second round tiers the rest: the lake bars grow to the high watermark, no reload.
            assert job.run_round().records == RECORDS - RECORDS // 2
        view.wait_for(lambda: min(view.shares("lake")) > 0.99, "full lake bars after the second round")
        assert browser.execute_script("return window.notReloaded") is True, "the page refreshed itself, it was not reloaded"
        assert "0 records not in the lake" in view.text(f'section[data-table="{TABLE}"] .meta')

        # Remote retention drops what the lake holds: the remote bars shrink from the left.
        widths = view.widths("remote")
        assert expire_remote(server.tablet.remote).expired > 0
        view.wait_for(lambda: all(now < before for now, before in zip(view.widths("remote"), widths)), "remote bars shrinking")
        _wait_to_scale(view, conn, table.path)
    assert (tmp_path / SCREENSHOT).read_bytes().startswith(b"\x89PNG")


def test_a_coordinator_apart_asks_its_tablet_servers_and_marks_a_silent_ones_buckets(tmp_path: Path, browser: WebDriver) -> None:
    coordinator = coordinator_apart(tmp_path)
    tablets = {server_id: tablet_server(tmp_path, coordinator, server_id) for server_id in (1, 2)}
    try:
        with lakelog.connect(coordinator.address) as conn:
            table = create_table(conn, buckets=BUCKETS)
            with table.new_append().create_writer() as writer:
                for bucket in range(BUCKETS):
                    writer.append_arrow(order_rows(0, 100 * (bucket + 1)), bucket=bucket)
            leaders = {bucket: info.leader for bucket, info in conn.admin.describe_buckets(table.path).items()}
        assert sorted(leaders.values()) == [1, 2]
        view = StatusView(browser, coordinator.status_url)
        for bucket, row in view.buckets().items():
            assert f"leader {leaders[bucket]}" in row["text"] and f"high watermark {100 * (bucket + 1)}" in row["text"]
            assert row["tiers"]["local"] == {"share": [0, 1], "label": f"0 – {100 * (bucket + 1)}"}

        silent = leaders[1]
        tablets.pop(silent).stop()
        view.wait_for(lambda: f"leader {silent} unavailable" in view.buckets()[1]["text"], "the silent server's bucket marked")
        assert "high watermark 100" in view.buckets()[0]["text"], "the other server's bucket still shown"
        assert f"server {silent}" in view.text(".chip.down")
    finally:
        for process in (*tablets.values(), coordinator):
            process.stop(0)


def test_cluster_status_is_plain_python_over_the_coordinator(server_factory: Callable[..., ServerProcess]) -> None:
    """What the page shows, without HTTP: per bucket the tiers in percent of the high watermark, the
    lake's lag from its newest record (clock fixed at 10 s) and the records not in the lake."""
    server = server_factory()
    assert server.coordinator is not None
    with lakelog.connect(server.address) as conn:
        table = create_table(conn, buckets=BUCKETS, properties=TIERED_TABLE)
        with table.new_append().create_writer() as writer:
            for bucket in range(BUCKETS):
                writer.append_arrow(order_rows(0, 100), bucket=bucket)
        conn.internal_admin.commit_lake_snapshot(table.path, LakeSnapshot(7, {0: LakeBucketOffset(0, 60, 1_000), 1: LakeBucketOffset(0, 25, 4_000)}))
    status = ClusterStatus(server.coordinator.coordinator, server.coordinator.tablets, clock=lambda: 10_000)
    status.sample()
    (shown,) = status.snapshot()["tables"]
    # The lake table itself holds nothing: no tiering job wrote it (the snapshot above was committed by hand).
    files = {"data_files": 0, "small_files": 0, "small_file_share": 0.0, "snapshots": 0, "last_compaction_ms": None}
    assert shown["lake"] == {
        "snapshot_id": 7, "lag_ms": 6_000, "offsets_behind": 40 + 75, "lag_history": [(10_000, 6_000)] * 2, "files": files
    }
    assert [bucket["high_watermark"] for bucket in shown["buckets"]] == [100, 100]
    assert [bucket["tiers"]["lake"] for bucket in shown["buckets"]] == [
        {"start": 0, "end": 60, "left_pct": 0.0, "width_pct": 60.0},
        {"start": 0, "end": 25, "left_pct": 0.0, "width_pct": 25.0},
    ]
    assert [bucket["tiers"]["remote"] for bucket in shown["buckets"]] == [None, None], "nothing uploaded: no remote bar"


def test_lake_lag_history_keeps_the_last_hour_per_table() -> None:
    history = LakeLagHistory(interval_ms=10_000)
    start = 1_700_000_000_000
    for minute in range(90):
        for sample in range(6):
            now = start + minute * 60_000 + sample * 10_000
            history.record(now, {"shop.orders": minute * 100, "shop.lines": None} if minute < 80 else {"shop.orders": 5})
    last = start + 90 * 60_000 - 10_000
    kept = history.samples("shop.orders", last)
    assert len(kept) == HOUR_MS // 10_000 and kept[0][0] > last - HOUR_MS and kept[-1] == (last, 5)
    assert history.samples("shop.orders", last + HOUR_MS // 2) == kept[len(kept) // 2 :], "older than an hour: gone"
    assert history.samples("shop.lines", now) == [], "a dropped table is forgotten"


# ---------------------------------------------------------------- same auth as the gRPC read calls


def _get(url: str, authorization: str | None = None, context: ssl.SSLContext | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers={"Authorization": authorization} if authorization else {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


GRANTS = {"reader": ["read"], "writer": ["write"], "admin": ["admin", "write", "read"], "servers": ["internal", "read"]}


def _auth_config(tmp_path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """A server config with auth on (metrics too) and the tokens of :data:`GRANTS` by name."""
    tokens = {name: secrets.token_urlsafe(24) for name in GRANTS}
    tokens_file = tmp_path / "tokens.json"
    tokens_file.write_text(json.dumps({name: {"sha256": hash_token(tokens[name]), "actions": actions} for name, actions in GRANTS.items()}))
    config = {
        "metrics.port": "0",
        "security.auth.enabled": "true",
        "security.auth.tokens-file": str(tokens_file),
        "security.auth.token": tokens["servers"],
    }
    return config, tokens


def test_a_browser_given_a_read_token_sees_the_page(server_factory: Callable[..., ServerProcess], browser: WebDriver, tmp_path: Path) -> None:
    config, tokens = _auth_config(tmp_path)
    server = server_factory(**config)
    with lakelog.connect(server.address, {"security.auth.token": tokens["admin"]}) as conn:
        create_table(conn, buckets=BUCKETS)
    browser.get(server.status_url)
    assert browser.title != "lakelog status" and not browser.find_elements(By.CSS_SELECTOR, ".bucket"), "no token, no page"
    # What a person types into the browser's prompt, given in the address here (any user name).
    view = StatusView(browser, server.status_url.replace("http://", f"http://anyone:{tokens['reader']}@"))
    view.wait_for(lambda: view.text("#updated").startswith("updated "), "a refresh with the token")
    assert browser.execute_script("return document.getElementById('error').hidden") is True, "its refreshes carry the token too"


def test_with_auth_the_page_needs_a_read_token_over_tls(server_factory: Callable[..., ServerProcess], tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "ca", "status-test")
    cert = ca.issue("server")
    config, tokens = _auth_config(tmp_path)
    server = server_factory(
        **config,
        **{
            "security.tls.enabled": "true",
            "security.tls.cert-file": str(cert.cert_file),
            "security.tls.key-file": str(cert.key_file),
            "security.tls.ca-file": str(ca.ca_file),
        },
    )
    assert server.status_url.startswith("https://")
    trusted = ssl.create_default_context(cafile=str(ca.ca_file))
    data_url = server.status_url + ".json"
    # A client that connects and never says a word must not hold up everyone else.
    silent = socket.create_connection(("127.0.0.1", server.metrics_port))
    for url in (server.status_url, data_url):
        status, headers, body = _get(url, context=trusted)
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic"), "a browser asks for the token"
        assert b"requires a bearer token" in body
        assert _get(url, f"Bearer {tokens['writer']}", trusted)[0] == 403, "a token without read"
        assert _get(url, f"Bearer {secrets.token_urlsafe(24)}", trusted)[0] == 401, "an unknown token"
    status, headers, body = _get(data_url, f"Bearer {tokens['reader']}", trusted)
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert [s["up"] for s in json.loads(body)["tablet_servers"]] == [True], "the coordinator reached its tablet server with its own token"
    basic = base64.b64encode(f"anyone:{tokens['reader']}".encode()).decode()
    status, headers, body = _get(server.status_url, f"Basic {basic}", trusted)
    assert status == 200 and body.startswith(b"<!doctype html>")
    assert "connect-src 'self'" in headers["Content-Security-Policy"], "the page loads nothing from elsewhere"
    with pytest.raises(OSError):  # no plaintext answer: the handshake fails
        urllib.request.urlopen(server.status_url.replace("https://", "http://"), timeout=10)
    silent.close()
