"""The Spark runtime lakelog's Spark parts share (the tiering job, the lake's Spark reader, the Spark
data source): sessions, a Connect server from the installed pyspark, the task worker's heap. Apart
from the core, so a client or a server never loads PySpark."""
