"""The `lakelog` command line."""
