"""The ``table.*`` properties lakelog understands: each parsed and range-checked in one place, at
create time (so a typo or ``local-segments=0`` is refused with the key and value named, not found
later by a background task) and again wherever a server reads them.

Keys outside ``table.`` are the user's own and pass through; sizes are bounded so one request cannot
store megabytes in the coordinator's metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from lakelog.config import format_duration_ms, format_size, parse_duration_ms, parse_size
from lakelog.errors import InvalidRequestError, InvalidTableError
from lakelog.metadata import DATALAKE_ENABLED, DATALAKE_FORMAT

LOCAL_SEGMENTS = "table.log.tiered.local-segments"
AUTO_PARTITION_ENABLED = "table.auto-partition.enabled"
AUTO_PARTITION_TIME_UNIT = "table.auto-partition.time-unit"
AUTO_PARTITION_NUM_PRECREATE = "table.auto-partition.num-precreate"
AUTO_PARTITION_NUM_RETENTION = "table.auto-partition.num-retention"
AUTO_PARTITION_TIME_ZONE = "table.auto-partition.time-zone"
# Partition names of auto-partitioning per time unit, as Fluss names them.
TIME_UNIT_FORMATS = {"year": "%Y", "month": "%Y%m", "day": "%Y%m%d", "hour": "%Y%m%d%H"}
TTL = "table.log.ttl"
TARGET_FILE_SIZE = "table.datalake.target-file-size"
AUTO_COMPACTION = "table.datalake.auto-compaction"
SNAPSHOT_RETENTION = "table.datalake.snapshot-retention"
ORPHAN_GRACE = "table.datalake.orphan-grace"
REPLICATION_FACTOR = "table.replication.factor"
MIN_IN_SYNC_REPLICAS = "table.log.replica.min-in-sync-replicas"
MAX_COMMENT_BYTES = 64 << 10
MAX_PROPERTIES = 256
MAX_KEY_BYTES = 256
MAX_VALUE_BYTES = 4 << 10
# Numeric properties are bounded where a larger value would overflow a timer or a date, or make one
# auto-partitioning pass create more partitions than a coordinator keeps (max.partition.num).
MAX_TTL_MS = 100 * 365 * 86_400_000
MAX_LOCAL_SEGMENTS = 1000
MAX_PRECREATE = 1000
MAX_RETENTION = 1_000_000
# Below this a lake file is mostly footer: compacting to it would not cut the per-file read cost;
# above the largest, one compaction task would rewrite more than a worker's disk holds comfortably.
MIN_TARGET_FILE_SIZE = 64 << 10
MAX_TARGET_FILE_SIZE = 16 << 30
MAX_REPLICAS = 1000  # copies of a bucket: each needs a tablet server of its own


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError("must be true or false")
    return text.lower() == "true"


def _iceberg(text: str) -> str:
    if text != "iceberg":
        raise ValueError("the only lake format is iceberg")
    return text


def _between(parse: Callable[[str], int], low: int, high: int, shown: Callable[[int], str] = str) -> Callable[[str], int]:
    """``parse``, refusing a value outside ``[low, high]`` (each bound as ``shown`` writes it)."""

    def checked(text: str) -> int:
        value = parse(text)
        if not low <= value <= high:
            raise ValueError(f"must be between {shown(low)} and {shown(high)}")
        return value

    return checked


def _time_unit(text: str) -> str:
    unit = text.lower()
    if unit not in TIME_UNIT_FORMATS:
        raise ValueError(f"must be one of {', '.join(TIME_UNIT_FORMATS)}")
    return unit


def _time_zone(text: str) -> ZoneInfo:
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError("not a time zone name (e.g. UTC, Europe/Berlin)") from None


@dataclass(frozen=True)
class TableProperty:
    parse: Callable[[str], Any]
    default: str


TABLE_PROPERTIES: Mapping[str, TableProperty] = {
    DATALAKE_ENABLED: TableProperty(_boolean, "false"),
    DATALAKE_FORMAT: TableProperty(_iceberg, "iceberg"),
    LOCAL_SEGMENTS: TableProperty(_between(int, 1, MAX_LOCAL_SEGMENTS), "2"),
    TTL: TableProperty(_between(parse_duration_ms, 1, MAX_TTL_MS, format_duration_ms), "7d"),
    # 128 MB: the per-file cost of a lake read (about 0.7 ms: footer, plan entry, open) is lost in
    # the seconds a file this size takes to decode, while one compaction task still rewrites a bin
    # in seconds and streams it row group by row group, so its memory does not grow with the size.
    TARGET_FILE_SIZE: TableProperty(_between(parse_size, MIN_TARGET_FILE_SIZE, MAX_TARGET_FILE_SIZE, format_size), "128mb"),
    AUTO_COMPACTION: TableProperty(_boolean, "false"),
    # 1 h: longer than a lake read holds one snapshot (a scanner plans a bucket's range at one
    # snapshot and reads it through), short enough that a table tiered every 10 s keeps a few
    # hundred snapshots in its metadata, which every commit rewrites.
    SNAPSHOT_RETENTION: TableProperty(_between(parse_duration_ms, 1, MAX_TTL_MS, format_duration_ms), "1h"),
    # 1 h, as remote.log.orphan-grace: far longer than a round or a compaction takes from writing its
    # first file to committing it, so a job that starts meanwhile never deletes files about to be
    # committed; a dead round's files stay this long. 0: removed by the next job that starts.
    ORPHAN_GRACE: TableProperty(_between(parse_duration_ms, 0, MAX_TTL_MS, format_duration_ms), "1h"),
    AUTO_PARTITION_ENABLED: TableProperty(_boolean, "false"),
    AUTO_PARTITION_TIME_UNIT: TableProperty(_time_unit, "day"),
    AUTO_PARTITION_NUM_PRECREATE: TableProperty(_between(int, 0, MAX_PRECREATE), "2"),
    AUTO_PARTITION_NUM_RETENTION: TableProperty(_between(int, 0, MAX_RETENTION), "7"),
    AUTO_PARTITION_TIME_ZONE: TableProperty(_time_zone, "UTC"),
}
# Properties whose default is a server setting: unset, they are not checked here.
SERVER_DEFAULTED: Mapping[str, Callable[[str], Any]] = {
    REPLICATION_FACTOR: _between(int, 1, MAX_REPLICAS),
    MIN_IN_SYNC_REPLICAS: _between(int, 1, MAX_REPLICAS),
}


def server_defaulted_property(where: str, properties: Mapping[str, str], key: str, default: int) -> int:
    """The parsed value of a property whose default is a server setting (``default`` when unset)."""
    value = properties.get(key)
    if value is None:
        return default
    try:
        return SERVER_DEFAULTED[key](value)
    except (TypeError, ValueError) as exc:
        raise InvalidTableError(f"{where}: table property {key}={value!r}: {exc}") from None


def table_property(where: str, properties: Mapping[str, str], key: str) -> Any:
    """The parsed value of ``key`` (its default when unset); a bad one raises InvalidTableError
    naming ``where`` (the table), the key and the value."""
    spec = TABLE_PROPERTIES[key]
    value = properties.get(key, spec.default)
    try:
        return spec.parse(value)
    except (TypeError, ValueError) as exc:
        raise InvalidTableError(f"{where}: table property {key}={value!r}: {exc}") from None


def validate_table_properties(where: str, properties: Mapping[str, str], comment: str) -> None:
    """Refuse unknown ``table.*`` keys, bad values and oversized properties or comments."""
    check_comment(where, comment)
    if len(properties) > MAX_PROPERTIES:
        raise InvalidTableError(f"{where}: {len(properties)} properties, at most {MAX_PROPERTIES}")
    for key, value in properties.items():
        if len(key.encode()) > MAX_KEY_BYTES or len(value.encode()) > MAX_VALUE_BYTES:
            raise InvalidTableError(
                f"{where}: table property {key[:64]!r} is too large (keys up to {MAX_KEY_BYTES} bytes, values up to {MAX_VALUE_BYTES})"
            )
        if key.startswith("table.") and key not in TABLE_PROPERTIES and key not in SERVER_DEFAULTED:
            known = ", ".join(sorted([*TABLE_PROPERTIES, *SERVER_DEFAULTED]))
            raise InvalidTableError(f"{where}: unknown table property {key!r} (known: {known})")
    for key in TABLE_PROPERTIES:
        table_property(where, properties, key)
    for key in SERVER_DEFAULTED:
        server_defaulted_property(where, properties, key, 1)


def check_comment(where: str, comment: str) -> None:
    size = len(comment.encode())
    if size > MAX_COMMENT_BYTES:
        raise InvalidRequestError(f"{where}: comment of {size} bytes, at most {MAX_COMMENT_BYTES}")
