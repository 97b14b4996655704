"""What a tiering commit records in its Iceberg snapshot summary, and how it is read back.

Each tiering commit is one snapshot whose summary carries ``lakelog.commit-user`` (the job that
committed it) and ``lakelog.bucket-offsets``: JSON ``{bucket: {"start", "end", "max_timestamp"}}``
covering every bucket tiered so far. A partitioned table's buckets are keyed
``"<partition_id>:<bucket>"`` (partition ids are the coordinator's, never reused, so a key names
one bucket log for good; a partition the log dropped keeps its key while the lake holds it). The lake, not the coordinator, is the source of truth for what
was tiered: a job resumes from here, and the coordinator is brought up to date from here.

A commit that tiered every bucket exactly up to a timestamp barrier B (docs/contract.md, "Tiering, consistent cuts and cursors") also carries
``lakelog.barrier`` = B: the snapshots of several tables with the same barrier are a consistent cut.

A compaction's snapshot holds the same records as the one it rewrote, so it carries that one's
``lakelog.bucket-offsets`` and ``lakelog.barrier`` unchanged, its own ``lakelog.commit-user``, and
``lakelog.compaction`` (JSON ``{"replaced": files, "written": files}``): it is the table's newest
lake snapshot and the newest of its barrier, and readers move to it.
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
COMPACTION = "lakelog.compaction"


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


def compaction_summary(table: Table, commit_user: str, replaced: int, written: int) -> dict[str, str]:
    """The summary of a compaction's snapshot on top of the table's current one: the newest tiering
    commit's offsets and barrier, exactly as they are."""
    carried: dict[str, str] = {}
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        # A PyIceberg summary answers None for a key it lacks (``in`` says yes to any key).
        found = {key: snapshot.summary.get(key) for key in (BUCKET_OFFSETS, BARRIER)} if snapshot.summary is not None else {}
        if found.get(BUCKET_OFFSETS) is not None:
            carried = {key: value for key, value in found.items() if value is not None}
            break
    return {**carried, COMMIT_USER: commit_user, COMPACTION: json.dumps({"replaced": replaced, "written": written})}


def barrier_snapshots(table: Table) -> dict[int, int]:
    """``{barrier: snapshot id}`` of the table's snapshots that carry a barrier, newest first (the
    newest wins should one repeat: a compaction's, over the tiering commit it rewrote). Every
    snapshot the table keeps counts, not only the current one's ancestors: an expiry keeps the
    snapshot of a barrier that a consistent cut still needs while removing some after it."""
    found: dict[int, int] = {}
    for snapshot in sorted(table.snapshots(), key=lambda s: s.sequence_number or 0, reverse=True):
        text = snapshot.summary.get(BARRIER) if snapshot.summary is not None else None
        if text is not None:
            try:
                found.setdefault(int(text), snapshot.snapshot_id)
            except ValueError:
                raise LakeDataError(f"snapshot {snapshot.snapshot_id}: summary {BARRIER} is not a number: {text[:50]!r}") from None
    return found


def served_snapshot_ids(table: Table) -> set[int]:
    """The snapshots tablet servers may hand to readers: per bucket, of the snapshots that end it
    where the lake ends it now, the newest (a tablet server takes the later of two notified
    snapshots that end a bucket at the same offset)."""
    ends: dict[LakeBucketKey, tuple[int, int, int]] = {}
    for snapshot in table.snapshots():
        text = snapshot.summary.get(BUCKET_OFFSETS) if snapshot.summary is not None else None
        if text is not None:
            for key, offsets in decode_bucket_offsets(text).items():
                ends[key] = max(ends.get(key, (-1, -1, -1)), (offsets.log_end_offset, snapshot.sequence_number or 0, snapshot.snapshot_id))
    return {snapshot_id for _, _, snapshot_id in ends.values()}


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
