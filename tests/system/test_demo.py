"""The README's main job runs end to end (on fewer records than its default) on a day-partitioned
table: all three tiers serve records, every record comes back once and in order (yesterday's
partition, dropped from the log, from the lake), and the lake answers a timestamp lookup;
its progress says what each produce is for, Spark keeps quiet, and its temporary directory is named
and removed."""

from __future__ import annotations

import os
import re
import subprocess
import sys


def test_demo_reads_back_everything_from_all_three_tiers(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "lakelog", "demo", "--records", "200000"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # where its temporary data directory goes
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "read back 200,000 of 200,000 records, in offset order, no gap, no duplicate" in result.stdout
    served = {tier: int(count.replace(",", "")) for tier, count in re.findall(r"^\s+(lake|remote|local)\s+([\d,]+)$", result.stdout, re.M)}
    assert set(served) == {"lake", "remote", "local"} and all(served.values()), result.stdout
    assert sum(served.values()) == 200_000
    assert "answered by the lake: yes" in result.stdout
    assert re.search(r"^   partition day=\d{8}: held by the lake only$", result.stdout, re.M), result.stdout
    data_dir = re.search(r"^data in (\S+) \(a temporary directory, removed when the demo ends\)$", result.stdout, re.M)
    assert data_dir and data_dir.group(1).startswith(str(tmp_path)), result.stdout
    assert f"removed the demo's temporary data directory {data_dir.group(1)}" in result.stdout
    assert not any(tmp_path.glob("lakelog-demo-*")), "nothing left behind"
    for why in ("first half", "second half", "to be uploaded", "to stay local"):
        assert f"   produce {why}: " in result.stderr, result.stderr
    assert "Using Spark's default log4j profile" not in result.stderr and " WARN " not in result.stderr, result.stderr
