"""Filters on ``__bucket``, ``__offset`` and ``__timestamp`` that Spark pushes to the data source,
turned into the bounds the range options already give: a query's ``WHERE __offset >= 1000`` reads
from offset 1000 instead of reading everything and dropping most of it.

Comparisons (``=``, ``<``, ``<=``, ``>``, ``>=``) with integers are taken on the three columns, and
``IN`` on ``__bucket``; each is applied exactly (a bucket's commit timestamps never decrease with
its offsets, so a timestamp bound is an offset bound found by the timestamp lookup), so Spark is
handed back only what is not taken. ``IS NOT NULL`` on them always holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from pyspark.sql.datasource import EqualTo, Filter, GreaterThan, GreaterThanOrEqual, In, IsNotNull, LessThan, LessThanOrEqual

from lakelog.record.meta_columns import BUCKET_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN

UNBOUNDED = (0, 1 << 63)


@dataclass
class PushedFilters:
    """Half-open ``[low, high)`` bounds per column; ``buckets`` (None: any) from ``=`` and ``IN``."""

    bounds: dict[str, tuple[int, int]]
    buckets: frozenset[int] | None = None

    @classmethod
    def none(cls) -> "PushedFilters":
        return cls({column: UNBOUNDED for column in (BUCKET_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN)})

    def push(self, filters: Iterable[Filter]) -> Iterator[Filter]:
        """Takes what it can; yields the filters Spark must still evaluate."""
        for item in filters:
            if not self._take(item):
                yield item

    def bucket_wanted(self, bucket: int) -> bool:
        low, high = self.bounds[BUCKET_COLUMN]
        return low <= bucket < high and (self.buckets is None or bucket in self.buckets)

    def _take(self, item: Filter) -> bool:
        column = item.attribute[0] if len(item.attribute) == 1 else None
        if column not in self.bounds:
            return False
        if isinstance(item, IsNotNull):
            return True
        if isinstance(item, In):
            if column != BUCKET_COLUMN or not all(_is_int(v) for v in item.value):
                return False
            wanted = frozenset(item.value)
            self.buckets = wanted if self.buckets is None else self.buckets & wanted
            return True
        value = getattr(item, "value", None)
        bound = _bounds(item, value) if _is_int(value) else None
        if bound is None:
            return False
        low, high = self.bounds[column]
        self.bounds[column] = (max(low, bound[0]), min(high, bound[1]))
        return True


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
