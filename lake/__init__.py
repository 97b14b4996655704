"""The lake tier: Iceberg LogSource plugins and the lake table layout."""
