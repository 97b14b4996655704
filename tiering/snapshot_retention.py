"""Which snapshots of a lake table an expiry keeps: the rule, apart from Iceberg.

A snapshot is kept while anyone may still read it:

- the table's current snapshot (Iceberg never removes a branch's head anyway);
- the snapshot the coordinator last committed, and the ones the tablet servers may still hold: they
  hand them to every lake read and timestamp lookup;
- every snapshot replaced less than ``table.datalake.snapshot-retention`` ago (the next snapshot
  committed after now minus retention): a read or a lookup that was handed a snapshot plans and
  reads it within that time, and a cursor, a ``(bucket, offset)``, needs no snapshot at all: every
  offset it may point at stays in the newest one, whose lake ranges a compaction or an expiry
  never change;
- the snapshot each consistent cut answers now: per other lake table, the newest
  snapshot at the largest barrier the two share, which is the answer
  ``admin.get_consistent_lake_snapshots`` gives for them, and for any set of tables one tiering
  job tiers (they share every barrier it commits, so the largest common one is the one the table
  shares with the set's laggard).

Measuring retention from when a snapshot was replaced, not from when it was committed, matters for
an idle table: its only tiering snapshot may be days old and still be what readers are handed
until a compaction replaces it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence


@dataclass(frozen=True)
class SnapshotEntry:
    """One snapshot of the table: its id, its sequence number (commit order) and commit time."""

    snapshot_id: int
    sequence_number: int
    timestamp_ms: int


def snapshots_to_keep(
    snapshots: Sequence[SnapshotEntry],
    current: int | None,
    coordinator: int | None,
    needed: Iterable[int],
    retention_ms: int,
    now_ms: int,
) -> set[int]:
    """The ids of ``snapshots`` an expiry keeps (see the module docstring); ``needed``: the ones
    consistent cuts answer and tablet servers may hand out."""
    ordered = sorted(snapshots, key=lambda s: s.sequence_number)
    kept = {i for i in (current, coordinator) if i is not None} | set(needed)
    cutoff = now_ms - retention_ms
    for snapshot, successor in zip(ordered, [*ordered[1:], None]):
        if successor is None or successor.timestamp_ms > cutoff:
            kept.add(snapshot.snapshot_id)
    return kept & {s.snapshot_id for s in snapshots}
