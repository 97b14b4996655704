"""How big each benchmark is: full sizes by default, small ones for ``--quick``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    """Records per benchmark (10 numeric columns, about 80 bytes each) and how many timed runs."""

    local_records: int = 5_000_000
    record_rows: int = 500_000
    remote_records: int = 3_000_000
    lake_records: int = 5_000_000
    tier_records: int = 1_000_000
    produce_records: int = 2_000_000
    lookup_records_per_tier: int = 2_000_000
    lookup_lake_files: int = 1_000
    lookups: int = 300
    memory_bytes: int = 4 << 30
    segment_bytes: int = 64 << 20
    scaling_records: int = 1_000_000
    scaling_lake_records: int = 200_000
    scaling_lake_files: tuple[int, ...] = (10, 1_000, 10_000)
    runs: int = 5
    hostile_polls: int = 200
    hostile_streams: int = 60
    failover_kills: int = 20
    evolution_records: int = 5_000_000
    group_records: int = 1_000_000
    group_kills: int = 20


FULL = Sizes()
QUICK = Sizes(
    local_records=1_000_000,
    record_rows=200_000,
    remote_records=500_000,
    lake_records=200_000,
    tier_records=100_000,
    produce_records=200_000,
    lookup_records_per_tier=100_000,
    lookup_lake_files=100,
    lookups=100,
    memory_bytes=150 << 20,
    segment_bytes=1 << 20,
    scaling_records=100_000,
    scaling_lake_records=20_000,
    scaling_lake_files=(10, 100, 1_000),
    runs=3,
    hostile_polls=50,
    hostile_streams=20,
    failover_kills=3,
    evolution_records=300_000,
    group_records=100_000,
    group_kills=3,
)
