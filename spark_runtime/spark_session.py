"""The SparkSession a tiering job runs its tasks in: ``local[*]``, a cluster URL or a Spark Connect
``sc://`` address; under ``spark-submit`` (no ``--spark-master``) the master spark-submit chose."""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakelog.lake_config import LakeConfig

DEFAULT_MASTER = "local[*]"
APP_NAME = "lakelog-tier"
QUIET_LOG4J2 = Path(__file__).with_name("spark_log4j2.properties")
# The heap of a driver lakelog starts (in local mode its tasks run in it too): a lake read's task
# result is a whole data file, and Spark's 1g default is too small for files of tens of MB.
# PYSPARK_SUBMIT_ARGS' --driver-memory, or spark-submit's own, decides instead.
LOCAL_DRIVER_MEMORY = "4g"
# Shared Connect session ids are uuid5(namespace, f"{address}#{generation}"): the same for every client.
SHARED_SESSION_NAMESPACE = uuid.UUID("6c616b65-6c6f-4700-8000-73706172b6b0")
# How many closed shared sessions a client steps past before it takes a session of its own.
SHARED_SESSION_GENERATIONS = 64
_SESSION_CLOSED = "SESSION_CLOSED"

log = logging.getLogger(__name__)
_shared: dict[str, "SparkSession"] = {}
_left: list["SparkSession"] = []  # sessions found closed, kept so no __del__ closes their channel
_shared_lock = threading.Lock()


def spark_log_conf(log_level: str) -> dict[str, str]:
    """Spark settings for a JVM that logs at ``log_level`` (Python's level names work too). ERROR
    holds from the JVM's first line on, through a log4j2 file (Spark's banner and its own notice of
    the level change stay out)."""
    level = log_level.upper().replace("WARNING", "WARN")
    if level == "ERROR":
        return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{QUIET_LOG4J2}"}
    return {"spark.log.level": level}


def spark_session(master: str | None = None, app_name: str = APP_NAME, log_level: str = "ERROR") -> "SparkSession":
    """``log_level``: Spark's own (DEBUG, INFO, WARN, ERROR) for a session this call starts; its
    console lines bury the job's own at anything below ERROR."""
    from pyspark.sql import SparkSession

    if master and master.startswith("sc://"):
        # Spark Connect's own builder: pyspark's generic one would switch the whole process to
        # Connect mode, and refuse outright when a classic session already runs in it.
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        return ConnectSession.builder.remote(master).appName(app_name).getOrCreate()
    builder = SparkSession.builder.appName(app_name)
    under_spark_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    if master or not under_spark_submit:
        master = master or DEFAULT_MASTER
        builder = builder.master(master)
        if master.startswith("local"):
            # Local Python workers must run this interpreter, the one lakelog is installed in.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            if "--driver-memory" not in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
                builder = builder.config("spark.driver.memory", LOCAL_DRIVER_MEMORY)
    # The job prints its own progress line; Spark's console bar would garble it.
    for key, value in spark_log_conf(log_level).items():
        builder = builder.config(key, value)
    if log_level.upper() not in ("DEBUG", "INFO"):
        logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO line per closed connection
    return builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()


def shared_connect_session(address: str) -> "SparkSession":
    """The Spark Connect session that every lakelog client of ``address`` joins, one per process.

    Spark Connect gives each session Python workers of its own, so a client in a session of its own
    starts them on its first job (seconds); in one shared session a new client's first job finds the
    workers the others left warm. The id is derived from ``address``, so clients agree on it without
    asking anyone. It is never released (``stop()`` on it only closes this process's channel): a
    released or idle-expired id is refused by the server for good, so a client that meets one steps
    on to the next generation's id, which every client derives alike. An address that names its own
    ``session_id`` gets exactly that session."""
    with _shared_lock:
        session = _shared.get(address)
        if session is None or session.is_stopped:
            session = _shared[address] = _join_shared(address)
        return session


@atexit.register
def _close_shared_channels() -> None:
    """Close the shared sessions' channels while gRPC's threads still run. Left to PySpark's
    ``__del__`` at interpreter shutdown, the close waits for a lock a frozen gRPC thread holds, and
    the process never exits (a script that read the lake and called its own ``spark.stop()`` hung
    so). Closing the channel ends nothing on the server: the session stays for the other clients.
    PySpark's own exit handler is not registered for these sessions (see :func:`_without_exit_cleanup`)."""
    with _shared_lock:
        sessions = list(_shared.values())
    for session in sessions:
        if not session.is_stopped:
            try:
                session.client.close()
            except Exception as error:  # noqa: BLE001 - exiting anyway; a failed close costs nothing
                log.debug("closing the channel of a shared Spark Connect session failed: %s", error)


def _without_exit_cleanup(session: "SparkSession") -> "SparkSession":
    """``session`` without what makes a process wait for its Connect server at exit: PySpark's exit
    handler, which asks the server to clean the session's ML cache (a shared session has none:
    lakelog runs no ML), and reattachable execution, whose ReleaseExecute calls run on a pool that
    Python joins at exit and retry for minutes against a server that was killed or hangs. Without
    reattaching, a query whose result stream breaks fails with an error rather than resuming."""
    atexit.unregister(session.client._on_exit)
    session.client.disable_reattachable_execute()
    return session


def _join_shared(address: str) -> "SparkSession":
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    if ";session_id=" in address:
        return _without_exit_cleanup(ConnectSession.builder.remote(address).create())
    separator = ";" if "/;" in address else "/;"
    for generation in range(SHARED_SESSION_GENERATIONS):
        session_id = uuid.uuid5(SHARED_SESSION_NAMESPACE, f"{address}#{generation}")
        session = _without_exit_cleanup(ConnectSession.builder.remote(f"{address}{separator}session_id={session_id}").create())
        session.release_session_on_close = False
        try:
            session.conf.get("spark.master")  # the first call: the server creates, joins or refuses the session
            return session
        except Exception as error:  # noqa: BLE001 - PySpark raises several classes; only a closed session is stepped past
            if _SESSION_CLOSED not in str(error):
                raise
            _left.append(session)  # not closed: PySpark's channel close can hang here
    log.info("the %d shared Spark Connect sessions of %s are closed; this client takes one of its own", SHARED_SESSION_GENERATIONS, address)
    return _without_exit_cleanup(ConnectSession.builder.remote(address).create())


def refuse_local_lake(spark: "SparkSession", lake_config: "LakeConfig") -> None:
    """Tasks of a Spark cluster run on other machines: a catalog or warehouse local to the lakelog
    servers' machine would be a different, empty one there (or Parquet written where no commit
    sees it). Refused with the keys to set; ``local[...]`` masters (also behind Spark Connect) pass."""
    master = spark.conf.get("spark.master", DEFAULT_MASTER) or DEFAULT_MASTER
    if not master.startswith("local"):
        lake_config.refuse_local_parts(f"Spark in cluster mode ({master})")
