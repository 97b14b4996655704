"""What the test tiers share: tables and waiting, servers in processes and apart, clusters, moto S3,
the remote and lake tiers, the three-tier table, and the seeded random-walk harness (a real
cluster, random tier transitions, an in-memory oracle)."""
