"""What a tiering commit records in its Iceberg snapshot summary, and how it is read back.

Each tiering commit is one snapshot whose summary carries ``lakelog.commit-user`` (the job that
committed it) and ``lakelog.bucket-offsets``: JSON ``{bucket: {"start", "end", "max_timestamp"}}``
covering every bucket tiered so far. A partitioned table's buckets are keyed
``"<partition_id>:<bucket>"`` (partition ids are the coordinator's, never reused, so a key names
one bucket log for good; a partition the log dropped keeps its key while the lake holds it). The lake, not the coordinator, is the source of truth for what
was tiered: a job resumes from here, and the coordinator is brought up to date from here.

A commit that tiered every bucket exactly up to a timestamp barrier B (docs/contract.md, "Tiering, consistent cuts and cursors") also carries
``lakelog.barrier`` = B: the snapshots of several tables with the same barrier are a consistent cut.
"""

from __future__ import annotations

import json
from typing import Mapping

from pyiceberg.table import Table
from pyiceberg.table.snapshots import ancestors_of

from lakelog.errors import LakeDataError
from lakelog.metadata import LakeBucketKey, LakeBucketOffset, LakeSnapshot, lake_bucket_key, lake_bucket_order, split_lake_bucket_key

COMMIT_USER = "lakelog.commit-user"
BUCKET_OFFSETS = "lakelog.bucket-offsets"
BARRIER = "lakelog.barrier"


PARTITION_SEPARATOR = ":"


def encode_bucket_key(key: LakeBucketKey) -> str:
    """``"<bucket>"``, or ``"<partition_id>:<bucket>"`` for a bucket of a partition."""
    partition_id, bucket = split_lake_bucket_key(key)
    return str(bucket) if partition_id is None else f"{partition_id}{PARTITION_SEPARATOR}{bucket}"


def decode_bucket_key(text: str) -> LakeBucketKey:
    partition_id, separator, bucket = text.rpartition(PARTITION_SEPARATOR)
    return lake_bucket_key(int(partition_id) if separator else None, int(bucket))


def encode_bucket_offsets(offsets: Mapping[LakeBucketKey, LakeBucketOffset]) -> str:
    return json.dumps(
        {
            encode_bucket_key(key): {"start": o.log_start_offset, "end": o.log_end_offset, "max_timestamp": o.log_max_timestamp}
            for key, o in sorted(offsets.items(), key=lambda item: lake_bucket_order(item[0]))
        },
        separators=(",", ":"),
    )


def decode_bucket_offsets(text: str) -> dict[LakeBucketKey, LakeBucketOffset]:
    try:
        return {
            decode_bucket_key(key): LakeBucketOffset(int(o["start"]), int(o["end"]), int(o.get("max_timestamp", -1)))
            for key, o in json.loads(text).items()
        }
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise LakeDataError(f"snapshot summary {BUCKET_OFFSETS} is not valid: {exc}: {text[:200]!r}") from None


def summary_properties(commit_user: str, offsets: Mapping[LakeBucketKey, LakeBucketOffset], barrier: int | None) -> dict[str, str]:
    """``barrier`` None: the round did not reach its barrier (a record budget cut it short), so the
    snapshot is no consistent cut and says so by carrying none."""
    properties = {COMMIT_USER: commit_user, BUCKET_OFFSETS: encode_bucket_offsets(offsets)}
    if barrier is not None:
        properties[BARRIER] = str(barrier)
    return properties


def barrier_snapshots(table: Table) -> dict[int, int]:
    """``{barrier: snapshot id}`` of the tiering commits on the table's main branch that carry a
    barrier, walked back from the current snapshot (the newest wins should one repeat)."""
    found: dict[int, int] = {}
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        text = snapshot.summary.get(BARRIER) if snapshot.summary is not None else None
        if text is not None:
            try:
                found.setdefault(int(text), snapshot.snapshot_id)
            except ValueError:
                raise LakeDataError(f"snapshot {snapshot.snapshot_id}: summary {BARRIER} is not a number: {text[:50]!r}") from None
    return found


def latest_lake_snapshot(table: Table) -> LakeSnapshot | None:
    """The newest snapshot on the table's main branch that a tiering commit wrote.

    Walks back from the current snapshot, so maintenance snapshots committed on top (compaction,
    rewrites without lakelog's summary) do not hide what was tiered.
    """
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        summary = snapshot.summary
        text = summary.get(BUCKET_OFFSETS) if summary is not None else None
        if text is not None:
            return LakeSnapshot(snapshot.snapshot_id, decode_bucket_offsets(text))
    return None
