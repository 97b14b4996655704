"""A Spark Connect server run from the installed pyspark, as a child process.

Clients and the tiering job reach Spark through it (``lake.spark.master=sc://HOST:PORT``) without a
JVM of their own. pyspark's wheel bundles everything needed: its ``bin/spark-submit`` launches the
``SparkConnectServer`` class of the connect jar under ``pyspark/jars``, so nothing is downloaded.
The server's Python workers run this interpreter, the one lakelog is installed in, because the lake
reader's and the tiering job's tasks import lakelog there.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping

from lakelog.errors import InvalidConfigError, LakelogError
from lakelog.spark_runtime.spark_session import LOCAL_DRIVER_MEMORY

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002
DEFAULT_MASTER = "local[*]"
# Spark's own INFO lines bury the one line that matters; --conf spark.log.level=INFO brings them back.
# In local mode the tasks run in the driver, and a lake read's task result is a whole data file:
# Spark's 1g default heap is too small for files of tens of MB. --conf overrides it.
# A task result over spark.task.maxDirectResultSize (1 MB by default) is stored in the block manager
# and fetched back by the driver through its shuffle client and server; a lake read's results are
# megabytes each, and that detour costs the JVM about a tenth of its CPU per read. Up to 64 MB they
# go to the driver directly (Spark caps this at spark.rpc.message.maxSize, 128 MB); --conf overrides it.
DEFAULT_SPARK_CONF = {
    "spark.log.level": "WARN",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": LOCAL_DRIVER_MEMORY,
    "spark.task.maxDirectResultSize": "64m",
}
# The server's JVM only carries bytes for lakelog (its tasks are Python; the JVM hands their Arrow
# batches on), yet C2 keeps compiling Spark's code through a server's first lake reads, costing more
# CPU than it saves. C1 alone compiles it at a fraction of that, and the copying it runs is the
# same intrinsics either way. A caller's spark.driver.extraJavaOptions come after these, so its own
# -XX flags win.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_POLL_S = 0.2


class SparkConnectServer:
    """Start with :meth:`start`, then :meth:`wait` or :meth:`stop`; also a context manager. Port 0
    picks a free one."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        master: str = DEFAULT_MASTER,
        conf: Mapping[str, str] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.master = master
        conf = dict(conf or {})
        # A log4j2 file of the caller's sets the level from the JVM's first line; the default
        # spark.log.level would lower it again once the server is up.
        own_java_options = conf.get(DRIVER_JAVA_OPTIONS, "")
        own_log4j2 = "log4j2.configurationFile" in own_java_options
        defaults = {key: value for key, value in DEFAULT_SPARK_CONF.items() if not (own_log4j2 and key == "spark.log.level")}
        self.conf = {**defaults, **conf, DRIVER_JAVA_OPTIONS: f"{JVM_OPTIONS} {own_java_options}".strip()}
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """What a client sets as ``lake.spark.master``."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"sc://{host}:{self.port}"

    def command(self) -> list[str]:
        import pyspark  # the server needs the full pyspark (its jars), not only the Connect client

        spark_home = Path(pyspark.__file__).parent
        conf = {**self.conf, "spark.connect.grpc.binding.address": self.host, "spark.connect.grpc.binding.port": str(self.port)}
        argv = [str(spark_home / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--name", "lakelog Spark Connect server"]
        argv += ["--master", self.master]
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        return argv

    def start(self, timeout_s: float = 120.0) -> "SparkConnectServer":
        """Launch the JVM and return once it accepts connections. Raises InvalidConfigError when the
        port is taken, LakelogError when the server exits or is not up within ``timeout_s``."""
        if self.port == 0:
            self.port = _free_port(self._connect_host())
        self._refuse_a_taken_port()
        import pyspark

        env = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent), "PYSPARK_PYTHON": sys.executable}
        # spark-submit execs into the JVM, so the child's pid is the JVM's: a signal reaches it directly.
        self._process = subprocess.Popen(self.command(), env=env, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while not self._accepts_connections():
            code = self._process.poll()
            if code is not None:
                raise LakelogError(f"the Spark Connect server exited with code {code} before listening (its output is above)")
            if time.monotonic() > deadline:
                self.stop()
                raise LakelogError(f"the Spark Connect server did not listen on {self.address} within {timeout_s:.0f}s")
            time.sleep(_POLL_S)
        return self

    def wait(self) -> int:
        """Until the server exits; its exit code."""
        assert self._process is not None, "start() first"
        return self._process.wait()

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (Spark's shutdown hooks stop the session), SIGKILL if it lingers past ``timeout_s``."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> "SparkConnectServer":
        return self if self._process is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _connect_host(self) -> str:
        return self.address[len("sc://") :].rsplit(":", 1)[0]

    def _accepts_connections(self) -> bool:
        try:
            with socket.create_connection((self._connect_host(), self.port), timeout=_POLL_S):
                return True
        except OSError:
            return False

    def _refuse_a_taken_port(self) -> None:
        """Checked first: otherwise whatever holds the port would look like this server being up."""
        if self._accepts_connections():
            raise InvalidConfigError(f"port {self.port} on {self._connect_host()} is in use: pick another with --port")



def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]
