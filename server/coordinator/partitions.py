"""The partitions of partitioned tables, as the coordinator keeps them (docs/contract.md, "Partitioned tables and bucket keys").

A partition is a name (its key values joined by ``$``) with an id the metadata store assigns and
never hands out again, and, like a table, a leader per bucket. Names are checked here before they
are stored, because tablet servers and remote storage use them in paths and object keys.
"""

from __future__ import annotations

import logging
from typing import Callable, Mapping

from lakelog.errors import InvalidPartitionError, PartitionAlreadyExistsError, PartitionNotExistError, TooManyPartitionsError
from lakelog.metadata import PartitionInfo, TableInfo, partition_name
from lakelog.server.coordinator.metadata_store import MetadataStore
from lakelog.server.coordinator.replica_placement import Placement

log = logging.getLogger(__name__)


class PartitionCatalog:
    """Create, drop and find partitions; callers hold the coordinator's lock around changes."""

    def __init__(self, store: MetadataStore, max_partitions: int) -> None:
        self._store = store
        self._max_partitions = max_partitions

    def name_of(self, info: TableInfo, spec: Mapping[str, object]) -> str:
        if not info.partitioned:
            raise InvalidPartitionError(f"table {info.path} is not partitioned")
        return partition_name(info.partition_keys, spec)

    def find(self, info: TableInfo, name: str) -> PartitionInfo | None:
        return next((p for p in self._store.partitions(info.table_id) if p.partition_name == name), None)

    def create(
        self, info: TableInfo, name: str, place: Callable[[], Placement], ignore_if_exists: bool
    ) -> tuple[PartitionInfo, Placement | None]:
        """The partition named ``name`` and, when this call created it, its buckets' placement
        (``place()``, asked only then: an existing partition needs no tablet server)."""
        lake_only = next((p for p in self._store.lake_only_partitions(info.table_id) if p.partition_name == name), None)
        if lake_only is not None:
            raise PartitionAlreadyExistsError(
                f"partition {name!r} (id {lake_only.partition_id}) of {info.path} was dropped from the log and is held by the"
                " lake only; its name is not reused (its lake records would mix with the new partition's)"
            )
        existing = self.find(info, name)
        if existing is not None:
            if ignore_if_exists:
                return existing, None
            raise PartitionAlreadyExistsError(f"table {info.path} already has partition {name!r} (id {existing.partition_id})")
        if self._store.partition_count() >= self._max_partitions:
            raise TooManyPartitionsError(
                f"cannot create partition {name!r} of {info.path}: the cluster holds {self._max_partitions} partitions,"
                " the most max.partition.num allows; drop some or raise it"
            )
        placement = place()
        created = self._store.insert_partition(info.table_id, name, placement.leaders, placement.replicas)
        log.info("created partition %s (id %d) of table %s, leaders %s", name, created.partition_id, info.path, placement.leaders)
        return created, placement

    def drop(self, info: TableInfo, name: str, ignore_if_not_exists: bool) -> PartitionInfo | None:
        """The partition dropped, or None when it did not exist and that is allowed. A lake-enabled
        table's partition stays listed as ``lake_only`` (its caller checked that the lake holds it)."""
        existing = self.find(info, name)
        if existing is None:
            if ignore_if_not_exists:
                return None
            raise PartitionNotExistError(f"table {info.path} has no partition {name!r}")
        self._store.delete_partition(existing.partition_id, lake_only=info.lake_enabled)
        log.info(
            "dropped partition %s (id %d) of table %s%s", name, existing.partition_id, info.path, ", kept in the lake" if info.lake_enabled else ""
        )
        return existing

    def undo(self, partition: PartitionInfo) -> list[int]:
        """Forget a partition just created that its leaders cannot hold (nothing was written to it,
        so the lake keeps nothing of it); its id, for the leaders to drop."""
        self._store.delete_partition(partition.partition_id)
        log.info("forgot partition %s (id %d): its leaders cannot hold it", partition.partition_name, partition.partition_id)
        return [partition.partition_id]

    def list(self, info: TableInfo) -> list[PartitionInfo]:
        if not info.partitioned:
            raise InvalidPartitionError(f"table {info.path} is not partitioned")
        listed = self._store.partitions(info.table_id) + self._store.lake_only_partitions(info.table_id)
        return sorted(listed, key=lambda p: p.partition_id)
