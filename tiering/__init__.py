"""The PySpark job that tiers the log into Iceberg exactly once."""
