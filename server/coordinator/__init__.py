"""The coordinator: databases, tables, bucket placement and lake snapshot bookkeeping."""
