"""A real standalone Spark cluster on loopback: one master and N workers, each its own JVM, started
with the launcher of the installed pyspark (``$SPARK_HOME/bin/spark-class``, SPARK_HOME being
pyspark's package directory), so nothing is downloaded. Each worker offers one core and a little
memory; a driver reaches the cluster at :attr:`StandaloneCluster.master_url`.

Used by tests/system/test_spark_cluster.py and by bench/spark_paths.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import IO

from tests.harness.s3 import free_port

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# What a driver asks of each executor: it must fit in one worker.
EXECUTOR_CONF = {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2"}


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def cluster_environment() -> dict[str, str]:
    """For the daemons and for a driver: pyspark's SPARK_HOME, Python workers running this
    interpreter (the one lakelog is installed in), everything on loopback."""
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


def submit_args() -> str:
    """PYSPARK_SUBMIT_ARGS for a driver process (``lakelog tier``): executor sizes that fit a worker."""
    return " ".join(f"--conf {key}={value}" for key, value in EXECUTOR_CONF.items()) + " pyspark-shell"


class StandaloneCluster:
    def __init__(self, workers: int = 2, worker_memory: str = "1g") -> None:
        self.workers = workers
        self.worker_memory = worker_memory
        self.port = free_port()
        self.ui_port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="lakelog-spark-standalone-"))
        self._processes: list[subprocess.Popen[bytes]] = []
        self._logs: list[IO[bytes]] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _launch(self, name: str, *argv: str) -> None:
        log = (self.root / f"{name}.log").open("wb")
        self._logs.append(log)
        command = [str(spark_home() / "bin" / "spark-class"), *argv]
        # spark-class execs the JVM, so the pid is the JVM's and SIGTERM reaches it.
        self._processes.append(
            subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=cluster_environment())
        )

    def start(self, timeout_s: float = 120.0) -> "StandaloneCluster":
        self._launch("master", MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port))
        for index in range(self.workers):
            work_dir = self.root / f"worker-{index}"
            work_dir.mkdir()
            self._launch(
                f"worker-{index}", WORKER_CLASS, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                "--cores", "1", "--memory", self.worker_memory, "--work-dir", str(work_dir), self.master_url,
            )
        deadline = time.monotonic() + timeout_s
        while self.alive_workers() < self.workers:
            for process in self._processes:
                assert process.poll() is None, f"a Spark daemon exited with {process.returncode}: {self.logs()}"
            assert time.monotonic() < deadline, f"the workers never all registered with the master: {self.logs()}"
            time.sleep(0.5)
        return self

    def alive_workers(self) -> int:
        """Workers the master counts as alive (its web UI's JSON)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json", timeout=2) as answer:
                return int(json.load(answer).get("aliveworkers", 0))
        except OSError:
            return 0

    def executor_hosts(self) -> int:
        """How many distinct worker directories ever ran an executor of any application."""
        return sum(1 for index in range(self.workers) if any((self.root / f"worker-{index}").iterdir()))

    def logs(self) -> str:
        return "\n".join(f"--- {path.name}\n{path.read_text(errors='replace')[-2000:]}" for path in sorted(self.root.glob("*.log")))

    def stop(self) -> None:
        for process in reversed(self._processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in reversed(self._processes):
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for log in self._logs:
            log.close()
        shutil.rmtree(self.root, ignore_errors=True)
