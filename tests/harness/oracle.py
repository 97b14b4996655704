"""Everything acknowledged, per bucket, in offset order: what every reader must see."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

import pyarrow as pa

import lakelog


@dataclass
class Oracle:
    buckets: int
    ids: dict[int, list[int]] = field(default_factory=dict)
    timestamps: dict[int, list[int]] = field(default_factory=dict)
    # Columns added by alters: name -> the first id written with a value in it (id + its number).
    added: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for bucket in range(self.buckets):
            self.ids[bucket] = []
            self.timestamps[bucket] = []

    def acknowledge(self, ack: lakelog.AppendAck, ids: list[int]) -> None:
        """One acknowledged append of ``ids``; offsets must continue the bucket exactly."""
        assert ack.base_offset == len(self.ids[ack.bucket]), (
            f"bucket {ack.bucket}: append acknowledged at offset {ack.base_offset}, "
            f"the oracle expected {len(self.ids[ack.bucket])}"
        )
        assert ack.record_count == len(ids)
        self.ids[ack.bucket].extend(ids)
        self.timestamps[ack.bucket].extend([ack.commit_timestamp] * len(ids))

    def add_column(self, name: str, first_id: int) -> None:
        self.added[name] = first_id

    def added_value(self, name: str, row_id: int) -> int | None:
        """What column ``name`` holds in row ``row_id``: null in rows written before it was added."""
        first = self.added[name]
        return row_id + int(name[1:]) if row_id >= first else None

    def high_watermark(self, bucket: int) -> int:
        return len(self.ids[bucket])

    def offset_for_timestamp(self, bucket: int, timestamp: int) -> int:
        """The first offset whose timestamp is >= ``timestamp`` (the high watermark if none)."""
        return bisect_left(self.timestamps[bucket], timestamp)

    def check(self, table: pa.Table, bucket: int, first_offset: int, where: str) -> None:
        """``table`` (a reader's records of ``bucket`` from ``first_offset``) is exactly the log there."""
        end = first_offset + table.num_rows
        assert end <= self.high_watermark(bucket), f"{where}: read past the high watermark of bucket {bucket}"
        offsets = table.column("__offset").to_pylist()
        assert offsets == list(range(first_offset, end)), f"{where}: bucket {bucket} offsets {offsets[:5]}... not from {first_offset}"
        assert table.column("id").to_pylist() == self.ids[bucket][first_offset:end], f"{where}: bucket {bucket} values differ"
        assert table.column("__timestamp").to_pylist() == self.timestamps[bucket][first_offset:end], (
            f"{where}: bucket {bucket} timestamps differ"
        )
        ids = table.column("id").to_pylist()
        assert table.column("name").to_pylist() == [f"n{i}" for i in ids] and table.column("amount").to_pylist() == [
            i * 0.5 for i in ids
        ], f"{where}: bucket {bucket} columns differ"
        for name in self.added.keys() & set(table.column_names):
            assert table.column(name).to_pylist() == [self.added_value(name, i) for i in ids], f"{where}: bucket {bucket} column {name} differs"


@dataclass
class Partition:
    """One partition of a partitioned table as the walk made it: its id, its log per bucket, and
    whether it was dropped (``lake_only``: from the log of a lake-enabled table, the lake holds it;
    ``ended``: from a table without the lake, its records are gone)."""

    name: str
    partition_id: int
    oracle: Oracle
    lake_only: bool = False
    ended: bool = False


@dataclass
class PartitionedOracle:
    """Every partition a partitioned table ever had, by id (ids are never reused; a name is again
    after its partition ended)."""

    buckets: int
    lake_enabled: bool
    by_id: dict[int, Partition] = field(default_factory=dict)

    def current(self) -> dict[str, Partition]:
        """The partitions listed now (live or lake-only), by name."""
        return {p.name: p for p in self.by_id.values() if not p.ended}

    def live(self) -> list[Partition]:
        return [p for p in self.by_id.values() if not p.ended and not p.lake_only]

    def create(self, name: str, partition_id: int) -> Partition:
        assert partition_id not in self.by_id, f"partition id {partition_id} ({name}) was used before by {self.by_id[partition_id].name}"
        partition = self.by_id[partition_id] = Partition(name, partition_id, Oracle(self.buckets))
        return partition

    def drop(self, partition: Partition) -> None:
        if self.lake_enabled:
            partition.lake_only = True
        else:
            partition.ended = True

    def listing(self) -> list[tuple[int, str, bool]]:
        """What ``list_partition_infos`` must answer: (id, name, lake_only), by id."""
        return sorted((p.partition_id, p.name, p.lake_only) for p in self.by_id.values() if not p.ended)
