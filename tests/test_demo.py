"""The README's main job runs end to end (on fewer records than its default): all three tiers
serve records, every record comes back once and in order, and the lake answers a timestamp lookup."""

from __future__ import annotations

import re
import subprocess
import sys


def test_demo_reads_back_everything_from_all_three_tiers(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "lakelog", "demo", "--records", "200000", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "read back 200,000 of 200,000 records, in offset order, no gap, no duplicate" in result.stdout
    served = {tier: int(count.replace(",", "")) for tier, count in re.findall(r"^\s+(lake|remote|local)\s+([\d,]+)$", result.stdout, re.M)}
    assert set(served) == {"lake", "remote", "local"} and all(served.values()), result.stdout
    assert sum(served.values()) == 200_000
    assert "answered by the lake: yes" in result.stdout
