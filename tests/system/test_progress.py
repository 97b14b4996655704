"""Progress on stderr as a user sees it: `lakelog produce` and `lakelog scan` run as subprocesses
against a real server, their stderr once a pseudo-terminal (a rich bar with the total and the time
left) and once a pipe (plain lines, nothing a log file cannot hold)."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from lakelog.progress import Progress
from lakelog.server.server_process import ServerProcess

RECORDS = 120_000
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess({"data.dir": str(tmp_path_factory.mktemp("progress-data")), "server.port": 0}) as process:
        yield process


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("progress-files") / "orders.csv"
    path.write_text("id,amount\n" + "".join(f"{i},{i * 0.5}\n" for i in range(RECORDS)))
    return path


def _env(server: ServerProcess) -> dict[str, str]:
    return {**os.environ, "LAKELOG_BOOTSTRAP": server.address, "TERM": "xterm-256color", "COLUMNS": "160"}


def _on_terminal(argv: list[str], env: dict[str, str], tmp_path: Path) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal and stdout in a file; (exit code, stdout, what the terminal showed)."""
    master, slave = pty.openpty()
    stdout_file = tmp_path / "stdout"
    with open(stdout_file, "wb") as stdout:
        process = subprocess.Popen(argv, env=env, stdout=stdout, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    shown = bytearray()
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    code = process.wait(timeout=120)
    return code, stdout_file.read_text(), shown.decode(errors="replace")


def _lakelog(*argv: str) -> list[str]:
    return [sys.executable, "-m", "lakelog", *argv]


def _create(server: ServerProcess, name: str) -> None:
    created = subprocess.run(_lakelog("table", "create", name, "--schema", "id:int64,amount:float64"), env=_env(server), capture_output=True, text=True)
    assert created.returncode == 0, created.stderr


def test_produce_draws_a_bar_with_the_total_on_a_terminal(server: ServerProcess, csv_file: Path, tmp_path: Path) -> None:
    _create(server, "bar.orders")
    code, stdout, shown = _on_terminal(_lakelog("produce", "bar.orders", "--file", str(csv_file)), _env(server), tmp_path)
    assert code == 0, shown
    assert stdout == f"produced {RECORDS:,} records to bar.orders\n"
    assert ANSI.search(shown), "a terminal gets rich's cursor and colour codes"
    text = ANSI.sub("", shown)
    assert "━" in text, "the bar itself"
    assert f"{RECORDS}/{RECORDS}" in text, "count and total (the CSV's lines, counted up front)"
    assert "100%" in text and "ETA" in text


def test_produce_and_scan_print_plain_lines_to_a_pipe(server: ServerProcess, csv_file: Path, tmp_path: Path) -> None:
    _create(server, "plain.orders")
    produced = subprocess.run(_lakelog("produce", "plain.orders", "--file", str(csv_file)), env=_env(server), capture_output=True, text=True)
    assert produced.returncode == 0, produced.stderr
    assert not ANSI.search(produced.stderr) and "\r" not in produced.stderr and "━" not in produced.stderr
    last = produced.stderr.splitlines()[-1]
    assert last.startswith(f"lakelog produce plain.orders: {RECORDS:,}/{RECORDS:,} records ("), produced.stderr

    with open(tmp_path / "out.jsonl", "w") as out:
        scanned = subprocess.run(_lakelog("scan", "plain.orders", "--output", "jsonl"), env=_env(server), stdout=out, stderr=subprocess.PIPE, text=True)
    assert scanned.returncode == 0, scanned.stderr
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == RECORDS
    assert scanned.stderr.splitlines()[-1].startswith(f"lakelog scan plain.orders: {RECORDS:,}/{RECORDS:,} records ("), scanned.stderr


def test_scan_to_a_file_draws_a_bar_on_the_terminal(server: ServerProcess, csv_file: Path, tmp_path: Path) -> None:
    _create(server, "scanbar.orders")
    subprocess.run(_lakelog("produce", "scanbar.orders", "--file", str(csv_file)), env=_env(server), capture_output=True, check=True)
    code, stdout, shown = _on_terminal(_lakelog("scan", "scanbar.orders", "--output", "csv", "--max-records", "50000"), _env(server), tmp_path)
    assert code == 0, shown
    assert len(stdout.splitlines()) == 50_000 + 1, "the header and the records, untouched by the bar"
    text = ANSI.sub("", shown)
    assert "━" in text and "50000/50000" in text, text


def test_plain_lines_say_what_is_left_and_end_with_the_count() -> None:
    stream = io.StringIO()
    with Progress("lakelog produce shop.orders", 100, stream=stream, interval_s=0) as progress:
        progress.advance(40)
        progress.note("a line of its own")
        progress.advance(60)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("lakelog produce shop.orders: 40/100 records (") and "left)" in lines[0]
    assert lines[1] == "a line of its own"
    assert lines[-1].startswith("lakelog produce shop.orders: 100/100 records (") and lines[-1].endswith(" s)")
    unknown = io.StringIO()
    with Progress("lakelog scan t", None, stream=unknown, interval_s=0) as progress:
        progress.advance(1)
    assert unknown.getvalue().splitlines()[-1].startswith("lakelog scan t: 1 record (")
