"""A consumer group over a table's whole history (docs/contract.md, "Consumer groups"): a reset by
timestamp into the part of the history only the lake holds, and a committed offset only the lake
holds, which the group's member then reads from the lake, on into the remote and local tiers.

The tiered log is the session's three-tier table (tests/system/conftest.py): a server on loopback,
two tiering rounds in-process on the shared SparkSession, then remote expiry, so the oldest offsets
are the lake's alone; the test only reads it.
"""

from __future__ import annotations

import lakelog
from tests.harness.waiting import wait_until
from tests.harness.three_tiers import BUCKETS, ROWS_PER_BATCH, TieredLog


def test_a_group_reset_by_timestamp_reads_from_the_lake_where_only_the_lake_holds_it(three_tiers: TieredLog) -> None:
    tiered = three_tiers
    # A time inside the lake-only part: the commit timestamp of bucket 0's fifth batch.
    ms = tiered.timestamps(0)[4 * ROWS_PER_BATCH]
    expected = {bucket: tiered.offset_for(bucket, ms) for bucket in range(BUCKETS)}
    assert all(0 < expected[b] < tiered.lake_only_end(b) for b in range(BUCKETS))

    config = {"client.lake.source": "iceberg-arrow", "client.scanner.group.session-timeout": "2s"}
    with lakelog.connect(tiered.server.address, config) as conn:
        assert conn.admin.reset_group_offsets("history", tiered.path, spec=lakelog.OffsetSpec.timestamp(ms)) == expected
        assert conn.admin.list_group_offsets("history", tiered.path) == expected
        ends = conn.admin.list_offsets(tiered.path, spec=lakelog.OffsetSpec.latest())
        with conn.get_table(tiered.path).new_scan().create_log_scanner(group="history") as scanner:
            offsets: dict[int, list[int]] = {b: [] for b in range(BUCKETS)}

            def read() -> bool:
                for record in scanner.poll(timeout_ms=200):
                    offsets[record.bucket].append(record.offset)
                return all(len(offsets[b]) >= ends[b] - expected[b] for b in range(BUCKETS))

            wait_until(read, "the group read from its reset offsets to the end", 120)
            for bucket in range(BUCKETS):
                assert offsets[bucket] == list(range(expected[bucket], ends[bucket])), f"bucket {bucket}: in order, no gap, no duplicate"
            tiers = scanner.records_by_tier()
            assert tiers.get("lake", 0) == sum(tiered.lake_only_end(b) - expected[b] for b in range(BUCKETS)), tiers
        assert conn.admin.list_group_offsets("history", tiered.path) == ends, "closing committed the ends"

