"""Which data files of a lake snapshot hold a bucket's offsets, in offset order.

PyIceberg plans at the given snapshot: the ``__bucket`` partition prunes other buckets, and file
statistics (lower and upper bounds of ``__offset`` and ``__timestamp``) prune files outside the
range. A bucket's files never overlap in offsets (each tiering round appends the next range), so
ordering them by their ``__offset`` lower bound and reading one after the other yields the log.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.conversions import from_bytes
from pyiceberg.expressions import And, BooleanExpression, EqualTo, GreaterThanOrEqual, LessThan
from pyiceberg.table import Table
from pyiceberg.types import LongType

from lakelog.errors import LakeDataError, LakeError, LakelogError
from lakelog.lake.table_layout import BUCKET_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN

MAX_OFFSET = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class LakeDataFile:
    """A data file holding offsets ``first_offset..last_offset`` (its statistics' bounds)."""

    path: str
    first_offset: int
    last_offset: int


def plan_bucket_files(
    table: Table,
    snapshot_id: int,
    bucket: int,
    start: int = 0,
    end: int = MAX_OFFSET,
    min_timestamp_ms: int | None = None,
) -> list[LakeDataFile]:
    """Files of snapshot ``snapshot_id`` that may hold offsets ``[start, end)`` of ``bucket``
    (and, with ``min_timestamp_ms``, a commit timestamp at or after it), by first offset."""
    row_filter: BooleanExpression = And(
        EqualTo(BUCKET_COLUMN, bucket), GreaterThanOrEqual(OFFSET_COLUMN, start), LessThan(OFFSET_COLUMN, end)
    )
    if min_timestamp_ms is not None:
        row_filter = And(row_filter, GreaterThanOrEqual(TIMESTAMP_COLUMN, min_timestamp_ms * 1000))
    try:
        tasks = list(table.scan(row_filter=row_filter, snapshot_id=snapshot_id).plan_files())
    except LakelogError:
        raise
    except Exception as exc:  # noqa: BLE001 - PyIceberg and the file systems raise many types
        raise LakeError(f"cannot plan a read of {'.'.join(table.name())} snapshot {snapshot_id} bucket {bucket}: {exc}") from exc
    field_id = table.schema().find_field(OFFSET_COLUMN).field_id
    files = []
    for task in tasks:
        data = task.file
        if task.delete_files:
            raise LakeDataError(f"lake data file {data.file_path} has delete files; lakelog lake tables are append-only")
        lower, upper = (data.lower_bounds or {}).get(field_id), (data.upper_bounds or {}).get(field_id)
        if lower is None or upper is None:
            raise LakeDataError(f"lake data file {data.file_path} has no {OFFSET_COLUMN} bounds to order it by")
        files.append(LakeDataFile(data.file_path, from_bytes(LongType(), lower), from_bytes(LongType(), upper)))
    return sorted(files, key=lambda f: f.first_offset)
