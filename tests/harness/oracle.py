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
