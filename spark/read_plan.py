"""The driver's plan of a Spark read: per bucket the offset range ``[start, end)`` to read, cut into
pieces of at most ``maxRecordsPerPartition`` records, one Spark partition each.

Every end is fixed here, once, and never past the high watermark read at plan time, so a DataFrame is
a bounded, repeatable snapshot of the log however long its tasks take and however much is produced
meanwhile. Pieces are cut by record count, not at tier boundaries: a task reads its range through one
LogScanner, which crosses lake, remote and local tiers by itself.

A partitioned table's buckets are those of its partitions, keyed ``(partition_id, bucket)``
(:data:`~lakelog.metadata.LakeBucketKey`); only the partitions the pushed filters keep are planned,
and a lake-only partition's range is the one the lake holds.
"""

from __future__ import annotations

from typing import Callable, Iterable

from lakelog.client.connection import Connection
from lakelog.errors import InvalidConfigError, PartitionNotExistError, TableNotExistError
from lakelog.log_ranges import BucketRange, split_ranges
from lakelog.metadata import LakeBucketKey, OffsetSpec, OffsetType, PartitionInfo, TableInfo, split_lake_bucket_key
from lakelog.record.meta_columns import OFFSET_COLUMN, TIMESTAMP_COLUMN
from lakelog.spark.pushed_filters import UNBOUNDED, PushedFilters
from lakelog.spark.read_options import OffsetBound


class TableOffsets:
    """Where an OffsetSpec falls in every bucket of a table or, for a partitioned table, in every
    bucket of the partitions ``wanted`` keeps (a lake-only partition's from the lake)."""

    def __init__(self, conn: Connection, info: TableInfo, wanted: Callable[[PartitionInfo], bool] = lambda _: True) -> None:
        self._conn = conn
        self.info = info
        self.partitions = [p for p in conn.admin.list_partition_infos(info.path) if wanted(p)] if info.partitioned else []

    def at(self, spec: OffsetSpec) -> dict[LakeBucketKey, int]:
        """Per bucket key, the offset ``spec`` names; a partition dropped meanwhile has none."""
        admin, path = self._conn.admin, self.info.path
        if not self.info.partitioned:
            return dict(admin.list_offsets(path, spec=spec))
        if not self.partitions:
            return {}
        if spec.type != OffsetType.LATEST:
            return self._subscribed(spec)
        offsets: dict[LakeBucketKey, int] = {}
        lake_ends = None
        for partition in self.partitions:
            pid = partition.partition_id
            if partition.lake_only:
                if lake_ends is None:
                    lake_ends = {key: o.log_end_offset for key, o in admin.get_lake_snapshot(path).bucket_offsets.items()}
                offsets.update({(pid, b): lake_ends.get((pid, b), 0) for b in range(self.info.buckets)})
                continue
            try:
                listed = admin.list_offsets(path, spec=spec, partition_name=partition.partition_name)
            except (PartitionNotExistError, TableNotExistError):
                continue
            offsets.update({(pid, b): offset for b, offset in listed.items()})
        return offsets

    def _subscribed(self, spec: OffsetSpec) -> dict[LakeBucketKey, int]:
        """The earliest or timestamp offsets as a whole-table scanner subscribes them: it asks the
        servers (and their lake) for partitions with a log, the lake alone for lake-only ones."""
        with self._conn.get_table(self.info.path).new_scan().create_log_scanner() as scanner:
            if spec.type == OffsetType.EARLIEST:
                scanner.subscribe_from_beginning()
            else:
                scanner.subscribe_from_timestamp(spec.ms)
            positions = scanner.positions()
        ids = {p.partition_id for p in self.partitions}
        return {key: offset for key, offset in positions.items() if key[0] in ids}


def resolve_bound(offsets: TableOffsets, bound: OffsetBound, keys: Iterable[LakeBucketKey]) -> dict[LakeBucketKey, int]:
    """Per bucket key among ``keys``, the offset ``bound`` names (timestamps resolved by the servers,
    and by the lake for what only the lake holds); a bucket number the option names applies to that
    bucket of every partition."""
    info = offsets.info
    unknown = sorted(set(bound.per_bucket) - set(range(info.buckets)))
    if unknown:
        raise InvalidConfigError(
            f"lakelog Spark option {bound.option!r} names bucket {unknown[0]}, but {info.path} has buckets 0..{info.buckets - 1}"
        )
    keys = list(keys)
    at = offsets.at(bound.default) if isinstance(bound.default, OffsetSpec) else dict.fromkeys(keys, bound.default)
    return {key: bound.per_bucket.get(split_lake_bucket_key(key)[1], at[key]) for key in keys if key in at}


def plan_ranges(
    conn: Connection, info: TableInfo, start: OffsetBound, end: OffsetBound, max_records: int, pushed: PushedFilters | None = None
) -> list[BucketRange]:
    """The pieces to read, bucket by bucket in offset order; buckets with nothing to read have none.
    ``pushed`` narrows the options' ranges by the filters Spark pushed down and chooses partitions."""
    pushed = pushed or PushedFilters.none()
    offsets = TableOffsets(conn, info, pushed.partition_wanted)
    latest = offsets.at(OffsetSpec.latest())
    starts = resolve_bound(offsets, start, latest)
    ends = {key: min(offset, latest[key]) for key, offset in resolve_bound(offsets, end, starts).items()}
    low, high = pushed.bounds[OFFSET_COLUMN]
    starts = {key: max(starts[key], low) for key in ends}
    ends = {key: min(offset, high) for key, offset in ends.items()}
    low_ms, high_ms = pushed.bounds[TIMESTAMP_COLUMN]
    if (low_ms, high_ms) != UNBOUNDED:
        # First offsets at or past each timestamp bound: timestamps never decrease within a bucket.
        at_low = offsets.at(OffsetSpec.timestamp(low_ms)) if low_ms > UNBOUNDED[0] else starts
        at_high = offsets.at(OffsetSpec.timestamp(high_ms)) if high_ms < UNBOUNDED[1] else ends
        starts = {key: max(offset, at_low.get(key, offset)) for key, offset in starts.items()}
        ends = {key: min(offset, at_high.get(key, offset)) for key, offset in ends.items()}
    return split_ranges(starts, ends, max_records, pushed.bucket_wanted)
