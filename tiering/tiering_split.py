"""One split of a tiering round: a bucket's offsets ``[start, end)``, one Spark task and one Parquet
file. The round's ranges are planned by :mod:`lakelog.log_ranges`; each partition of a partitioned
table tiers like a table, its buckets keyed ``(partition_id, bucket)``
(:data:`~lakelog.metadata.LakeBucketKey`)."""

from __future__ import annotations

from dataclasses import dataclass

from lakelog.metadata import LakeBucketKey, TablePath, lake_bucket_key


@dataclass(frozen=True)
class TieringSplit:
    """Offsets ``[start_offset, end_offset)`` of one bucket (of partition ``partition_id``, named
    ``partition_name``, of a partitioned table), to be written to ``file_path``."""

    table: TablePath
    bucket: int
    start_offset: int
    end_offset: int
    file_path: str
    partition_id: int | None = None
    partition_name: str = ""

    @property
    def key(self) -> LakeBucketKey:
        return lake_bucket_key(self.partition_id, self.bucket)
