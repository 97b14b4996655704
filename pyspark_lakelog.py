"""``spark.read.format("lakelog")`` with no ``lakelog.spark.register(spark)`` call: Spark registers
the ``DefaultSource`` of every installed top-level module named ``pyspark_*`` by itself.
:func:`lakelog.spark.register` still adds filter pushdown (README, "Reading from Spark")."""

from lakelog.spark.lakelog_data_source import FoundLakelogDataSource as DefaultSource

__all__ = ["DefaultSource"]
