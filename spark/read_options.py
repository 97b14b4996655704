"""The options of ``spark.read.format("lakelog")``, parsed and checked before anything connects.

Spark hands a Python data source its options with lower-cased keys, so they are matched
case-insensitively; errors name an option as the README documents it. Unknown options are refused:
a misspelt ``endingOffset`` must not silently read the whole table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from lakelog.config import Configuration
from lakelog.errors import InvalidConfigError, LakelogError
from lakelog.metadata import OffsetSpec, TablePath
from lakelog.log_ranges import MAX_RECORDS_PER_SPLIT

BOOTSTRAP = "bootstrap"
TABLE = "table"
PATH = "path"  # what DataFrameReader.load("db.table") sets
COLUMNS = "columns"
STARTING_OFFSETS = "startingOffsets"
ENDING_OFFSETS = "endingOffsets"
STARTING_TIMESTAMP = "startingTimestamp"
ENDING_TIMESTAMP = "endingTimestamp"
MAX_RECORDS_PER_PARTITION = "maxRecordsPerPartition"
MAX_OFFSETS_PER_TRIGGER = "maxOffsetsPerTrigger"
CONF_PREFIX = "conf."
OPTION_NAMES = (
    BOOTSTRAP, TABLE, PATH, COLUMNS, STARTING_OFFSETS, ENDING_OFFSETS, STARTING_TIMESTAMP, ENDING_TIMESTAMP, MAX_RECORDS_PER_PARTITION,
    MAX_OFFSETS_PER_TRIGGER,
)
# A batch read has an end, a stream has none; only a stream has triggers.
BATCH_ONLY = (ENDING_OFFSETS, ENDING_TIMESTAMP)
STREAM_ONLY = (MAX_OFFSETS_PER_TRIGGER,)
LAKE_SOURCE_KEY = "client.lake.source"
# Spark tasks read the lake in-process: the PySpark LogSource would start a SparkSession inside a task.
TASK_LAKE_SOURCE = "iceberg-arrow"


@dataclass(frozen=True)
class OffsetBound:
    """One end of the range read from every bucket: ``default`` (an offset, or an OffsetSpec the
    driver resolves per bucket) except for the buckets ``per_bucket`` names. ``option`` is the
    option it came from, for errors."""

    option: str
    default: OffsetSpec | int
    per_bucket: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ReadOptions:
    bootstrap: str
    path: TablePath
    columns: tuple[str, ...] | None  # None: every column
    start: OffsetBound
    end: OffsetBound
    max_records_per_partition: int
    client_config: Mapping[str, Any]  # for lakelog.connect, on the driver and in every task
    max_offsets_per_trigger: int | None = None  # streams only; None: everything available


def parse_read_options(options: Mapping[str, str], streaming: bool | None = False) -> ReadOptions:
    """Raises :class:`InvalidConfigError` naming the first bad, missing or unknown option (or one
    that does not apply: an end to a stream, a trigger limit to a batch read). A stream starts at
    ``latest`` unless told otherwise, as Kafka's does. ``streaming=None``: either, for what both
    share (the schema, which Spark asks before it knows which one it reads)."""
    known = {name.lower(): name for name in OPTION_NAMES}
    given: dict[str, str] = {}
    config: dict[str, str] = {}
    for key, value in options.items():
        if key.lower().startswith(CONF_PREFIX):
            config[key[len(CONF_PREFIX) :]] = value
        elif key.lower() in known:
            given[known[key.lower()]] = value
        else:
            raise InvalidConfigError(
                f"unknown lakelog Spark option {key!r}; options are {', '.join(OPTION_NAMES)} and conf.<lakelog config key>"
            )
    refused = [] if streaming is None else [name for name in (BATCH_ONLY if streaming else STREAM_ONLY) if name in given]
    if refused:
        raise InvalidConfigError(
            f"lakelog Spark option {refused[0]!r} applies to {'spark.read' if streaming else 'spark.readStream'} only"
        )
    return ReadOptions(
        bootstrap=_required(given, BOOTSTRAP),
        path=_table_path(given),
        columns=_columns(given.get(COLUMNS)),
        start=_bound(given, STARTING_OFFSETS, STARTING_TIMESTAMP, OffsetSpec.latest() if streaming else OffsetSpec.earliest()),
        end=_bound(given, ENDING_OFFSETS, ENDING_TIMESTAMP, OffsetSpec.latest()),
        max_records_per_partition=_positive(given, MAX_RECORDS_PER_PARTITION, MAX_RECORDS_PER_SPLIT),
        client_config=_client_config(config),
        max_offsets_per_trigger=_positive(given, MAX_OFFSETS_PER_TRIGGER, 0) if MAX_OFFSETS_PER_TRIGGER in given else None,
    )


def _required(given: Mapping[str, str], option: str) -> str:
    value = given.get(option, "").strip()
    if not value:
        raise InvalidConfigError(f"lakelog Spark option {option!r} is required")
    return value


def _table_path(given: Mapping[str, str]) -> TablePath:
    if TABLE in given and PATH in given and given[TABLE] != given[PATH]:
        raise InvalidConfigError(f"lakelog Spark option {TABLE!r} is {given[TABLE]!r} but load() names {given[PATH]!r}")
    text = given.get(TABLE) or given.get(PATH)
    if not text:
        raise InvalidConfigError(f"lakelog Spark option {TABLE!r} is required (DB.TABLE), or load('DB.TABLE')")
    try:
        return TablePath.parse(text.strip())
    except LakelogError as exc:
        raise InvalidConfigError(f"lakelog Spark option {TABLE!r}: {exc}") from None


def _columns(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    names = tuple(name.strip() for name in text.split(","))
    if not all(names) or len(set(names)) != len(names):
        raise InvalidConfigError(f"lakelog Spark option {COLUMNS!r} must list distinct column names, comma-separated; got {text!r}")
    return names


def _integer(option: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InvalidConfigError(f"lakelog Spark option {option!r}: {text!r} is not an integer") from None
    if value < 0:
        raise InvalidConfigError(f"lakelog Spark option {option!r}: {value} is negative")
    return value


def _positive(given: Mapping[str, str], option: str, default: int) -> int:
    value = _integer(option, given[option]) if option in given else default
    if value == 0:
        raise InvalidConfigError(f"lakelog Spark option {option!r} must be positive")
    return value


def _bound(given: Mapping[str, str], offsets_option: str, timestamp_option: str, default: OffsetSpec) -> OffsetBound:
    """From ``earliest`` | ``latest`` | one offset for every bucket | JSON ``{"bucket": offset}``
    (the other buckets at ``default``), or from a timestamp in ms; never both."""
    if offsets_option in given and timestamp_option in given:
        raise InvalidConfigError(f"lakelog Spark options {offsets_option!r} and {timestamp_option!r} exclude each other")
    if timestamp_option in given:
        return OffsetBound(timestamp_option, OffsetSpec.timestamp(_integer(timestamp_option, given[timestamp_option])))
    text = given.get(offsets_option, "").strip()
    if text.lower() in ("", "earliest", "latest"):
        spec = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest()}.get(text.lower(), default)
        return OffsetBound(offsets_option, spec)
    if not text.startswith("{"):
        return OffsetBound(offsets_option, _integer(offsets_option, text))
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidConfigError(f"lakelog Spark option {offsets_option!r}: not valid JSON: {exc}") from None
    if not isinstance(loaded, dict):
        raise InvalidConfigError(f"lakelog Spark option {offsets_option!r}: expected a JSON object of bucket to offset")
    per_bucket = {_integer(offsets_option, str(bucket)): _integer(offsets_option, str(offset)) for bucket, offset in loaded.items()}
    return OffsetBound(offsets_option, default, per_bucket)


def _client_config(config: Mapping[str, str]) -> dict[str, Any]:
    """The ``conf.*`` options as a lakelog client config, checked now; the lake is read in-process."""
    if config.get(LAKE_SOURCE_KEY, TASK_LAKE_SOURCE) != TASK_LAKE_SOURCE:
        raise InvalidConfigError(
            f"lakelog Spark option {CONF_PREFIX}{LAKE_SOURCE_KEY}: Spark tasks read the lake with {TASK_LAKE_SOURCE!r},"
            f" not {config[LAKE_SOURCE_KEY]!r}"
        )
    try:
        return Configuration({**config, LAKE_SOURCE_KEY: TASK_LAKE_SOURCE}).items()
    except InvalidConfigError as exc:
        raise InvalidConfigError(f"lakelog Spark option {CONF_PREFIX}*: {exc}") from None
