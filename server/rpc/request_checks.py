"""Checks of the lake offsets the internal and tiering RPCs carry, naming the offending field.

A lake range is trusted by fetches (which tier answers) and by remote expiry (what may be deleted),
so a range that is not a range, a bucket the table lacks or a table nobody knows is refused before
anything is stored, with the field path in the message (``notify_buckets_req[2].log_start_offset``).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Protocol

from lakelog.errors import InvalidRequestError


class LakeBucketFields(Protocol):
    bucket_id: int
    log_start_offset: int
    log_end_offset: int


class NotifiedBucketFields(LakeBucketFields, Protocol):
    table_id: int
    snapshot_id: int


def check_lake_bucket(where: str, item: LakeBucketFields, buckets: int) -> None:
    """One bucket's lake range: a bucket of the table, ``0 <= log_start_offset <= log_end_offset``."""
    if not 0 <= item.bucket_id < buckets:
        raise InvalidRequestError(
            f"{where}.bucket_id {item.bucket_id}: the table has no bucket {item.bucket_id} (it has buckets 0..{buckets - 1})"
        )
    if item.log_start_offset < 0:
        raise InvalidRequestError(f"{where}.log_start_offset {item.log_start_offset} is negative")
    if item.log_start_offset > item.log_end_offset:
        raise InvalidRequestError(
            f"{where}: log_start_offset {item.log_start_offset} is past log_end_offset {item.log_end_offset}: not a range"
        )


def check_lake_buckets(where: str, items: Iterable[LakeBucketFields], buckets: int) -> None:
    """A table's bucket ranges (CommitLakeTableSnapshot's ``buckets_req``): each valid, each bucket once."""
    seen: set[int] = set()
    for index, item in enumerate(items):
        check_lake_bucket(f"{where}[{index}]", item, buckets)
        if item.bucket_id in seen:
            raise InvalidRequestError(f"{where}[{index}].bucket_id {item.bucket_id} appears twice")
        seen.add(item.bucket_id)


def check_notified_offsets(method: str, items: Iterable[NotifiedBucketFields], tables: Mapping[int, int]) -> None:
    """NotifyLakeTableOffset's ``notify_buckets_req``: every table one of ``tables`` (id -> bucket
    count, the tables this server leads), every range valid."""
    for index, item in enumerate(items):
        where = f"{method}: notify_buckets_req[{index}]"
        if item.table_id not in tables:
            raise InvalidRequestError(f"{where}.table_id {item.table_id} is not a table this tablet server leads")
        if item.snapshot_id < 0:
            raise InvalidRequestError(f"{where}.snapshot_id {item.snapshot_id} is negative")
        check_lake_bucket(where, item, tables[item.table_id])
