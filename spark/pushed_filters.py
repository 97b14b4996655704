"""Filters that Spark pushes to the data source, turned into what to read: a query's
``WHERE __offset >= 1000`` reads from offset 1000 instead of reading everything and dropping most of
it, and ``WHERE dt = '20261123'`` on a table partitioned by ``dt`` reads that partition alone.

Comparisons (``=``, ``<``, ``<=``, ``>``, ``>=``) with integers are taken on ``__bucket``,
``__offset``, ``__timestamp`` and ``__partition_id``, and ``IN`` on ``__bucket`` and
``__partition_id``. On a partition key column (every row of a partition holds its partition's value
there), ``=``, ``<=>``, ``IN``, the comparisons, ``STARTSWITH``, ``ENDSWITH`` and ``CONTAINS`` with
strings, ``IS [NOT] NULL`` and ``NOT`` of any of these choose partitions. Each is applied exactly (a
bucket's commit timestamps never decrease with its offsets, so a timestamp bound is an offset bound
found by the timestamp lookup), so Spark is handed back only what is not taken. ``IS NOT NULL`` on
the meta columns always holds.

On a table with bucket keys, ``=``, ``<=>`` and ``IN`` on every bucket key column choose the buckets
those key values hash to (:mod:`lakelog.client.bucket_assigner`): ``WHERE user_id = 42`` reads one
bucket in every tier, the lake included. Spark still evaluates these filters (a bucket holds other
keys too).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from lakelog.client.bucket_assigner import BucketAssigner
from lakelog.errors import SchemaMismatchError
from lakelog.metadata import PartitionInfo, TableInfo, partition_spec
from lakelog.record.meta_columns import BUCKET_COLUMN, OFFSET_COLUMN, PARTITION_ID_COLUMN, TIMESTAMP_COLUMN

UNBOUNDED = (0, 1 << 63)
# Combinations of bucket key values hashed at most to choose buckets (more: every bucket is read).
MAX_KEY_COMBINATIONS = 10_000
# Columns whose IN lists a set of values (the others' values are ranges).
_SET_COLUMNS = (BUCKET_COLUMN, PARTITION_ID_COLUMN)

# A partition's key values (partition key -> value) -> whether a filter keeps its rows.
PartitionTest = Callable[[Mapping[str, str]], bool]

_STRING_TESTS: dict[type, Callable[[str, str], bool]] = {
    EqualTo: lambda have, value: have == value,
    EqualNullSafe: lambda have, value: have == value,
    GreaterThan: lambda have, value: have > value,
    GreaterThanOrEqual: lambda have, value: have >= value,
    LessThan: lambda have, value: have < value,
    LessThanOrEqual: lambda have, value: have <= value,
    StringStartsWith: str.startswith,
    StringEndsWith: str.endswith,
    StringContains: lambda have, value: value in have,
}


@dataclass
class PushedFilters:
    """Half-open ``[low, high)`` bounds per meta column; ``sets`` (absent: any) from ``=`` and ``IN``
    on ``__bucket`` and ``__partition_id``; ``partition_keys`` the table's, on which ``tests`` choose
    partitions."""

    bounds: dict[str, tuple[int, int]]
    sets: dict[str, frozenset[int]] = field(default_factory=dict)
    partition_keys: tuple[str, ...] = ()
    tests: list[PartitionTest] = field(default_factory=list)
    assigner: BucketAssigner | None = None  # a table with bucket keys: how key values map to buckets
    key_values: dict[str, frozenset[Any]] = field(default_factory=dict)
    key_buckets: frozenset[int] | None = None  # from key_values once pushed; None: any

    @classmethod
    def none(cls, partition_keys: Iterable[str] = ()) -> "PushedFilters":
        columns = (BUCKET_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN, PARTITION_ID_COLUMN)
        return cls({column: UNBOUNDED for column in columns}, partition_keys=tuple(partition_keys))

    @classmethod
    def for_table(cls, info: TableInfo) -> "PushedFilters":
        pushed = cls.none(info.partition_keys)
        if info.bucket_keys:
            pushed.assigner = BucketAssigner.for_table(info)
        return pushed

    def push(self, filters: Iterable[Filter]) -> Iterator[Filter]:
        """Takes what it can; yields the filters Spark must still evaluate."""
        for item in filters:
            test = _partition_test(item, self.partition_keys)
            if test is not None:
                self.tests.append(test)
            elif not self._take(item):
                self._note_key_values(item)
                yield item
        self.key_buckets = self._buckets_of_key_values()

    def bucket_wanted(self, bucket: int) -> bool:
        return self._wanted(BUCKET_COLUMN, bucket) and (self.key_buckets is None or bucket in self.key_buckets)

    def _note_key_values(self, item: Filter) -> None:
        """The values ``=``, ``<=>`` or ``IN`` allow on a bucket key column, if ``item`` is one."""
        attribute = getattr(item, "attribute", ())
        if self.assigner is None or len(attribute) != 1 or attribute[0] not in self.assigner.key_names:
            return
        if isinstance(item, In):
            values = frozenset(item.value)
        elif isinstance(item, EqualNullSafe) or (isinstance(item, EqualTo) and item.value is not None):
            values = frozenset([item.value])
        else:
            return
        column = attribute[0]
        self.key_values[column] = self.key_values[column] & values if column in self.key_values else values

    def partition_wanted(self, partition: PartitionInfo) -> bool:
        """Whether the filters keep any row of ``partition`` (of a table partitioned by ``partition_keys``)."""
        if not self._wanted(PARTITION_ID_COLUMN, partition.partition_id):
            return False
        values = partition_spec(self.partition_keys, partition.partition_name) if self.tests else {}
        return all(test(values) for test in self.tests)

    def _wanted(self, column: str, value: int) -> bool:
        low, high = self.bounds[column]
        return low <= value < high and value in self.sets.get(column, (value,))

    def _take(self, item: Filter) -> bool:
        attribute = getattr(item, "attribute", ())  # Not has none
        column = attribute[0] if len(attribute) == 1 else None
        if column not in self.bounds:
            return False
        if isinstance(item, IsNotNull):
            return True
        if isinstance(item, In):
            if column not in _SET_COLUMNS or not all(_is_int(v) for v in item.value):
                return False
            wanted = frozenset(item.value)
            self.sets[column] = self.sets[column] & wanted if column in self.sets else wanted
            return True
        value = getattr(item, "value", None)
        bound = _bounds(item, value) if _is_int(value) else None
        if bound is None:
            return False
        low, high = self.bounds[column]
        self.bounds[column] = (max(low, bound[0]), min(high, bound[1]))
        return True

    def _buckets_of_key_values(self) -> frozenset[int] | None:
        """The buckets the noted key values hash to; None (any) when a key column has none noted,
        the combinations are too many, or a value does not hash as its column's type."""
        assigner = self.assigner
        if assigner is None or set(self.key_values) != set(assigner.key_names):
            return None
        columns = [sorted(self.key_values[name], key=repr) for name in assigner.key_names]
        if math.prod(len(values) for values in columns) > MAX_KEY_COMBINATIONS:
            return None
        try:
            return frozenset(assigner.row_bucket(dict(zip(assigner.key_names, combo))) for combo in itertools.product(*columns))
        except SchemaMismatchError:
            return None


def _partition_test(item: Filter, partition_keys: tuple[str, ...]) -> PartitionTest | None:
    """How ``item`` chooses partitions, or None when it is not a filter on one partition key alone
    that can be decided from the key's value (a partition key is never null)."""
    if isinstance(item, Not):
        inner = _partition_test(item.child, partition_keys)
        return None if inner is None else lambda values: not inner(values)
    attribute = getattr(item, "attribute", ())
    if len(attribute) != 1 or attribute[0] not in partition_keys:
        return None
    key = attribute[0]
    if isinstance(item, (IsNull, IsNotNull)):
        holds = isinstance(item, IsNotNull)
        return lambda values: holds
    if isinstance(item, In):
        if not all(isinstance(v, str) for v in item.value):
            return None
        wanted = frozenset(item.value)
        return lambda values: values[key] in wanted
    compare = _STRING_TESTS.get(type(item))
    value = getattr(item, "value", None)
    if compare is None or not isinstance(value, str):
        return None
    return lambda values: compare(values[key], value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bounds(item: Filter, value: int) -> tuple[int, int] | None:
    """The half-open range a comparison with ``value`` allows."""
    low, high = UNBOUNDED
    if isinstance(item, EqualTo):
        return value, value + 1
    if isinstance(item, GreaterThan):
        return value + 1, high
    if isinstance(item, GreaterThanOrEqual):
        return value, high
    if isinstance(item, LessThan):
        return low, value
    if isinstance(item, LessThanOrEqual):
        return low, value + 1
    return None
