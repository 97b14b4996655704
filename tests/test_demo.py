"""The README's main job runs end to end (on fewer records than its default)."""

from __future__ import annotations

import subprocess
import sys


def test_demo_reads_back_everything(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "lakelog", "demo", "--records", "120000", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "read back 120,000 of 120,000 records, in offset order, no gap, no duplicate" in result.stdout
