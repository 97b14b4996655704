"""Small fakes of the coordinator's seams, for building a ``Coordinator`` directly on a temporary
SQLite store: tablet servers that record what they are told (and can refuse it), and a lake that
records the tables it creates and evolves (and can refuse them)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import pyarrow as pa

from lakelog.errors import LakelogError
from lakelog.lake_config import LakeConfig
from lakelog.metadata import BucketInfo, TablePath
from lakelog.cluster_state import LakeOffsets, ServerNode, TableAssignment
from lakelog.server.coordinator.coordinator import Coordinator
from lakelog.server.coordinator.lake_tables import LakeTables
from lakelog.server.coordinator.metadata_store import MetadataStore


@dataclass
class Told:
    """One NotifyLeaders a tablet server received."""

    server_id: int
    tables: list[TableAssignment]
    dropped: list[int]


@dataclass
class RecordingTablets:
    """The coordinator's tablet servers: every call recorded; ``refuse[server_id]`` is raised from
    that server's NotifyLeaders; ``described`` answers DescribeBuckets per physical id."""

    told: list[Told] = field(default_factory=list)
    lake_offsets: list[tuple[int, list[LakeOffsets]]] = field(default_factory=list)
    refuse: dict[int, LakelogError] = field(default_factory=dict)
    described: dict[int, dict[int, BucketInfo]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def notify_leaders(self, node: ServerNode, tables: Sequence[TableAssignment], dropped: Sequence[int]) -> None:
        with self.lock:
            self.told.append(Told(node.server_id, list(tables), list(dropped)))
        if node.server_id in self.refuse:
            raise self.refuse[node.server_id]

    def notify_lake_offsets(self, node: ServerNode, offsets: Sequence[LakeOffsets]) -> None:
        with self.lock:
            self.lake_offsets.append((node.server_id, list(offsets)))

    def describe_buckets(self, node: ServerNode, table_id: int, buckets: Iterable[int], partition_id: int = 0) -> dict[int, BucketInfo]:
        known = self.described.get(partition_id or table_id, {})
        return {bucket: known[bucket] for bucket in buckets if bucket in known}

    def leaders_told(self, server_id: int) -> dict[int, dict[int, int]]:
        """What ``server_id`` was last told it leads, per physical id."""
        with self.lock:
            told = [t for t in self.told if t.server_id == server_id]
        led: dict[int, dict[int, int]] = {}
        for notice in told:
            for assignment in notice.tables:
                led[assignment.info.physical_id] = dict(assignment.leaders)
            for physical_id in notice.dropped:
                led.pop(physical_id, None)
        return led


class RecordingLake(LakeTables):
    """The coordinator's lake: creates and evolves nothing but a record (``refuse`` is raised instead)."""

    def __init__(self, config: LakeConfig) -> None:
        super().__init__(config)
        self.created: list[tuple[TablePath, pa.Schema, tuple[str, ...]]] = []
        self.evolved: list[tuple[TablePath, pa.Schema]] = []
        self.refuse: LakelogError | None = None

    def create_table(self, path: TablePath, schema: pa.Schema, partition_keys: Sequence[str] = ()) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.created.append((path, schema, tuple(partition_keys)))

    def evolve_table(self, path: TablePath, schema: pa.Schema) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.evolved.append((path, schema))


def coordinator_on(
    data_dir: Path,
    tablets: RecordingTablets,
    lake: RecordingLake | None = None,
    servers: int = 3,
    max_buckets_per_server: int = 100,
    max_partitions: int = 1000,
    replication_factor: int = 1,
) -> Coordinator:
    """A coordinator whose metadata lives in ``data_dir``, with ``servers`` tablet servers (ids 1..)
    registered (a second call on the same directory is the coordinator restarted)."""
    store = MetadataStore(data_dir / "metadata.db")
    coordinator = Coordinator(
        store,
        tablets,
        lake or RecordingLake(LakeConfig()),
        heartbeat_timeout_ms=10_000,
        max_buckets_per_server=max_buckets_per_server,
        max_partitions=max_partitions,
        default_replication_factor=replication_factor,
    )
    for server_id in range(1, servers + 1):
        coordinator.register_tablet_server(ServerNode(server_id, "tablet", 9000 + server_id))
    return coordinator
