"""The SparkSession a tiering job runs its tasks in: ``local[*]``, a cluster URL or a Spark Connect
``sc://`` address; under ``spark-submit`` (no ``--spark-master``) the master spark-submit chose."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakelog.lake_config import LakeConfig

DEFAULT_MASTER = "local[*]"
APP_NAME = "lakelog-tier"


def spark_session(master: str | None = None, app_name: str = APP_NAME) -> "SparkSession":
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
    # The job prints its own progress line; Spark's console bar would garble it.
    return builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()


def refuse_local_lake(spark: "SparkSession", lake_config: "LakeConfig") -> None:
    """Tasks of a Spark cluster run on other machines: a catalog or warehouse local to the lakelog
    servers' machine would be a different, empty one there (or Parquet written where no commit
    sees it). Refused with the keys to set; ``local[...]`` masters (also behind Spark Connect) pass."""
    master = spark.conf.get("spark.master", DEFAULT_MASTER) or DEFAULT_MASTER
    if not master.startswith("local"):
        lake_config.refuse_local_parts(f"Spark in cluster mode ({master})")
