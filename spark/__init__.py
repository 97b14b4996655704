"""Reading lakelog tables from Spark: ``spark.read.format("lakelog")`` and
``spark.readStream.format("lakelog")`` (PySpark's Python data source API, no JVM jar), after
:func:`register` (or without it: module ``pyspark_lakelog``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakelog.spark.lakelog_data_source import LakelogDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LakelogDataSource", "register"]


# Spark refuses a Python data source that takes filters unless this is on.
FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: "SparkSession") -> None:
    """Make ``format("lakelog")`` known to ``spark`` and let it take filters on ``__bucket``,
    ``__offset``, ``__timestamp``, ``__partition_id`` and partition keys (once per session; again is
    harmless)."""
    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    spark.dataSource.register(LakelogDataSource)
