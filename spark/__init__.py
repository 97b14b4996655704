"""Reading lakelog tables from Spark: ``spark.read.format("lakelog")`` (PySpark's Python data
source API, no JVM jar), after :func:`register`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakelog.spark.lakelog_data_source import LakelogDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LakelogDataSource", "register"]


def register(spark: "SparkSession") -> None:
    """Make ``format("lakelog")`` known to ``spark`` (once per session; again is harmless)."""
    spark.dataSource.register(LakelogDataSource)
