"""`lakelog spark-connect` in its own process, for the tests that reach Spark through it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.harness.s3 import free_port


def start_spark_connect(log: Path) -> tuple[subprocess.Popen[str], str]:
    """`lakelog spark-connect` in its own process (local[2]) and process group (its JVM in the same
    group, so a test can signal the whole server with ``os.killpg``), its log in ``log``; the
    process and its ``sc://`` address once it says it is ready."""
    port = free_port()
    # The repository on its Python path, as site-packages is after a regular install: Spark finds
    # module pyspark_lakelog with pkgutil.iter_modules, which cannot see an editable install's modules.
    python_path = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")]))
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "lakelog", "spark-connect", "--port", str(port), "--master", "local[2]"],
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
            env={**os.environ, "PYTHONPATH": python_path},
            start_new_session=True,
        )
    assert proc.stdout is not None
    ready = proc.stdout.readline()
    assert f"ready on sc://127.0.0.1:{port}" in ready, f"spark-connect said {ready!r}; its log: {log.read_text()[-3000:]}"
    return proc, f"sc://127.0.0.1:{port}"
