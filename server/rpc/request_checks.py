"""Checks of the lake offsets the internal and tiering RPCs carry, naming the offending field.

A lake range is trusted by fetches (which tier answers) and by remote expiry (what may be deleted),
so a range that is not a range, a bucket the table lacks or a table nobody knows is refused before
anything is stored, with the field path in the message (``notify_buckets_req[2].log_start_offset``).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Protocol

from lakelog.errors import InvalidRequestError


class LakeBucketFields(Protocol):
    partition_id: int
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
    """A table's bucket ranges (CommitLakeTableSnapshot's ``buckets_req``): each valid, each bucket
    (of each partition) once."""
    seen: set[tuple[int, int]] = set()
    for index, item in enumerate(items):
        check_lake_bucket(f"{where}[{index}]", item, buckets)
        if (item.partition_id, item.bucket_id) in seen:
            of = f" of partition {item.partition_id}" if item.partition_id else ""
            raise InvalidRequestError(f"{where}[{index}].bucket_id {item.bucket_id}{of} appears twice")
        seen.add((item.partition_id, item.bucket_id))


def check_notified_offsets(method: str, items: Iterable[NotifiedBucketFields], tables: Mapping[int, int]) -> None:
    """NotifyLakeTableOffset's ``notify_buckets_req``: every table (or partition, when
    ``partition_id`` is set) one of ``tables`` (table or partition id -> bucket count, what this
    server leads), every range valid."""
    for index, item in enumerate(items):
        where = f"{method}: notify_buckets_req[{index}]"
        led = item.partition_id or item.table_id
        if led not in tables:
            what = f"partition_id {item.partition_id} is not a partition" if item.partition_id else f"table_id {item.table_id} is not a table"
            raise InvalidRequestError(f"{where}.{what} this tablet server leads")
        if item.snapshot_id < 0:
            raise InvalidRequestError(f"{where}.snapshot_id {item.snapshot_id} is negative")
        check_lake_bucket(where, item, tables[led])
