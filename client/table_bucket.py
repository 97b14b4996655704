"""The client core's one name for a bucket: ``TableBucket(table_id, partition_id, bucket)``.

A bucket of a partitioned table is a bucket of one partition, so the core keys every bucket it
writes, fetches or buffers by all three (as Fluss's ``TableBucket`` and Kafka's ``TopicPartition``
do) and never by a bare bucket number. The public API keeps the shapes the contract gives it: a
table's (or one partition's) buckets by number, a partitioned table's by ``(partition_id, bucket)``;
:meth:`public_key` is where the two meet.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TableBucket:
    table_id: int
    partition_id: int | None
    bucket: int

    def public_key(self, by_partition: bool) -> int | tuple[int, int]:
        """The bucket as the public API keys it: ``(partition_id, bucket)`` where the API spans a
        partitioned table's partitions (``by_partition``), else its number."""
        return (self.partition_id, self.bucket) if by_partition and self.partition_id is not None else self.bucket

    @property
    def order(self) -> tuple[int, int, int]:
        """Sorts a table's buckets by partition id, then number (unpartitioned first)."""
        return self.table_id, -1 if self.partition_id is None else self.partition_id, self.bucket

    def __str__(self) -> str:
        partition = "" if self.partition_id is None else f" partition {self.partition_id}"
        return f"table {self.table_id}{partition} bucket {self.bucket}"
