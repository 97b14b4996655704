"""The seeded random-walk harness: a real cluster, random tier transitions, an in-memory oracle."""
