"""The coordinator's logic: catalog operations, bucket placement, lake snapshot bookkeeping and
telling tablet servers what they lead and what the lake holds.

Plain Python, no gRPC: the RPC handlers in lakelog.server.rpc call these methods, and tests can too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol, Sequence

from lakelog.errors import (
    DatabaseAlreadyExistError,
    DatabaseNotEmptyError,
    DatabaseNotExistError,
    InvalidRequestError,
    LakelogError,
    LakeSnapshotNotExistError,
    NetworkError,
    NotLeaderError,
    PartitionNotInLakeError,
    RequestTimeoutError,
    SchemaNotExistError,
    StaleLakeSnapshotError,
    StorageError,
    TableAlreadyExistError,
    TableNotExistError,
    TooManyBucketsError,
    UnknownServerError,
)
from lakelog.lake_config import LakeConfig
from lakelog.log_source import LakeTableStats
from lakelog.cluster_state import BucketReplicas, LakeOffsets, ServerNode, TableAssignment
from lakelog.metadata import (
    BucketInfo,
    LakeBucketKey,
    LakeBucketOffset,
    LakeSnapshot,
    PartitionInfo,
    SchemaInfo,
    TableChange,
    TableDescriptor,
    TableInfo,
    TablePath,
    TieringJobInfo,
    split_lake_bucket_key,
    validate_name,
)
from lakelog.schema_evolution import apply_changes
from lakelog.security.writer_tokens import WriterIdentity, WriterTokens, new_writer_key
from lakelog.server.coordinator.auto_partitioning import AutoPartitioner, auto_partition_spec
from lakelog.server.coordinator.bucket_describer import BucketDescriber, describe_assignment
from lakelog.server.coordinator.lake_tables import LakeTables
from lakelog.server.coordinator.replica_election import preferred_leader, without_server
from lakelog.server.coordinator.replica_placement import Placement, place_buckets
from lakelog.server.coordinator.table_properties import (
    REPLICATION_FACTOR,
    check_comment,
    server_defaulted_property,
    validate_table_properties,
)
from lakelog.server.coordinator.metadata_store import MetadataStore
from lakelog.server.coordinator.partitions import PartitionCatalog
from lakelog.server.coordinator.tablet_liveness import TabletLiveness
from lakelog.write_fence import fenced_leaders

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LakeCommit:
    """A lake snapshot the coordinator accepted: its table and how many records it added to the
    lake beyond the snapshot held before (none when a job re-sends it)."""

    path: TablePath
    records_added: int


class TabletNotifier(BucketDescriber, Protocol):
    """How the coordinator reaches a tablet server (gRPC in production)."""

    def notify_leaders(self, node: ServerNode, tables: Sequence[TableAssignment], dropped: Sequence[int]) -> None: ...

    def notify_lake_offsets(self, node: ServerNode, offsets: Sequence[LakeOffsets]) -> None: ...


class Coordinator:
    def __init__(
        self,
        store: MetadataStore,
        notifier: TabletNotifier,
        lake: LakeTables,
        heartbeat_timeout_ms: int,
        max_buckets_per_server: int,
        max_partitions: int = 1000,
        auto_partition_interval_ms: int = 60_000,
        default_replication_factor: int = 1,
    ) -> None:
        """``auto_partitioner`` is started by the caller (the coordinator role), which also closes it."""
        self._default_replication_factor = default_replication_factor
        self._store = store
        self.max_buckets_per_server = max_buckets_per_server
        self.writer_key = store.writer_key(new_writer_key())
        self._writer_tokens = WriterTokens(self.writer_key)
        self.partitions = PartitionCatalog(store, max_partitions)
        self.auto_partitioner = AutoPartitioner(self, auto_partition_interval_ms)
        self._notifier = notifier
        self._lake = lake
        self.liveness = TabletLiveness(heartbeat_timeout_ms, (node.server_id for node in store.tablet_servers()))
        self._handled_down: set[int] = set()  # servers whose buckets check_liveness moved already
        self._isr_grew = threading.Event()  # an ISR took a replica back: its preferred leader may return
        # Replica changes go out on one queue per server: in order for each, and a paused server
        # (whose calls time out) holds up no other server and not the liveness check.
        self._replica_notices: dict[int, ThreadPoolExecutor] = {}
        # Live servers a replica change did not reach: told their buckets as they are now on the
        # next liveness check (one just restarted finds the coordinator's channel still backing off
        # from while it was down, and would otherwise act on stale leadership until it restarts).
        self._missed_notices: set[int] = set()
        self._lock = threading.Lock()
        # Lake notifications go out one at a time, each with what is stored when it is sent, so
        # two commits racing cannot leave a tablet server with the older offsets.
        self._lake_notify_lock = threading.Lock()

    # tiering jobs

    def tiering_heartbeat(self, job_id: str, tables: tuple[TablePath, ...], barrier: int) -> None:
        if not job_id:
            raise InvalidRequestError("a tiering heartbeat needs a job id")
        self._store.upsert_tiering_job(TieringJobInfo(job_id, tables, barrier, time.time_ns() // 1_000_000))

    def tiering_jobs(self) -> list[TieringJobInfo]:
        """Every job that ever reported, oldest heartbeat first; stored, so a restart loses no status."""
        return self._store.tiering_jobs()

    # idempotent writers

    def init_writer(self, principal: str) -> WriterIdentity:
        """A new writer id and the token that proves it was issued to ``principal``."""
        writer_id = self._store.allocate_writer_id()
        log.info("writer id %d allocated%s", writer_id, f" to {principal!r}" if principal else "")
        return WriterIdentity(writer_id, self._writer_tokens.issue(writer_id, principal))

    # databases

    def create_database(self, name: str, ignore_if_exists: bool = False, comment: str = "") -> None:
        validate_name("database", name)
        check_comment(f"database {name}", comment)
        with self._lock:
            if self._store.database_exists(name):
                if ignore_if_exists:
                    return
                raise DatabaseAlreadyExistError(f"database {name!r} already exists")
            self._store.insert_database(name, comment)
        log.info("created database %s", name)

    def drop_database(self, name: str, ignore_if_not_exists: bool = False, cascade: bool = False) -> None:
        validate_name("database", name)
        with self._lock:
            if not self._store.database_exists(name):
                if ignore_if_not_exists:
                    return
                raise DatabaseNotExistError(f"database {name!r} does not exist")
            tables = self._store.tables_in(name)
            if tables and not cascade:
                raise DatabaseNotEmptyError(f"database {name!r} still has {len(tables)} table(s); drop them or cascade")
            dropped = [log_id for info in tables for log_id in self._drop(info)]
            self._store.delete_database(name)
        log.info("dropped database %s", name)
        self._tell_leaders([], dropped)

    def list_databases(self) -> list[str]:
        return self._store.list_databases()

    # tables

    def create_table(self, path: TablePath, descriptor: TableDescriptor, ignore_if_exists: bool = False) -> int:
        """Create a table; a lake-enabled one gets its Iceberg table first, so a schema the lake
        cannot hold is refused before the lakelog table exists."""
        descriptor.validate()
        validate_table_properties(f"table {path}", descriptor.properties, descriptor.comment)
        auto_partition_spec(path, descriptor.properties, descriptor.partition_keys)
        if descriptor.lake_enabled:
            descriptor = self._lake.with_format(descriptor)
        with self._lock:
            if not self._store.database_exists(path.database):
                raise DatabaseNotExistError(f"database {path.database!r} does not exist")
            existing = self._store.table_by_path(path)
            if existing is not None:
                if ignore_if_exists:
                    return existing.table_id
                raise TableAlreadyExistError(f"table {path} already exists")
            # A partitioned table's buckets are its partitions': it has none of its own to lead.
            placement = (
                Placement({})
                if descriptor.partition_keys
                else self._place(f"table {path}", descriptor.buckets, self._store.table_count(), descriptor.properties)
            )
            if descriptor.lake_enabled:
                self._lake.create_table(path, descriptor.schema, descriptor.partition_keys)
            info = self._store.insert_table(path, descriptor, placement.leaders, placement.replicas)
        log.info(
            "created table %s (id %d, %d buckets, leaders %s%s)", path, info.table_id, info.buckets, placement.leaders, _copies(placement)
        )
        if placement.leaders:
            self._tell_new_leaders(TableAssignment(info, placement.leaders, placement.replicas), lambda: self._drop(info))
        self.auto_partitioner.check(info)
        return info.table_id

    def _place(self, what: str, buckets: int, start: int, properties: Mapping[str, str]) -> Placement:
        """Replicas for ``buckets`` buckets, leaders round robin over the tablet servers from
        ``start``; refused when a server would keep more than ``max_buckets_per_server`` bucket
        copies (a follower's copy holds its files open as a leader's does). Lock held."""
        factor = server_defaulted_property(what, properties, REPLICATION_FACTOR, self._default_replication_factor)
        servers = [node.server_id for node in self._store.tablet_servers()]
        down = self.liveness.down()
        placement = place_buckets(what, buckets, start, servers, [s for s in servers if s not in down], factor)
        added = Counter(
            server
            for bucket, leader in placement.leaders.items()
            for server in (placement.replicas[bucket].replicas if bucket in placement.replicas else (leader,))
        )
        kept = self._store.buckets_per_server()
        for server_id, count in sorted(added.items()):
            if kept.get(server_id, 0) + count > self.max_buckets_per_server:
                log.warning("refused to create %s: tablet server %d keeps %d buckets of at most %d", what, server_id, kept.get(server_id, 0), self.max_buckets_per_server)
                raise TooManyBucketsError(
                    f"cannot create {what}: {count} more buckets on tablet server {server_id}, which keeps"
                    f" {kept.get(server_id, 0)}, would pass coordinator.max-buckets-per-tablet-server ="
                    f" {self.max_buckets_per_server}; drop tables or partitions, or add tablet servers"
                )
        return placement

    # partitions

    def create_partition(self, path: TablePath, spec: Mapping[str, object], ignore_if_exists: bool = False) -> PartitionInfo:
        """Create a partition of a partitioned table, its buckets placed like a table's."""
        with self._lock:
            info = self.table(path)
            name = self.partitions.name_of(info, spec)
            partition, placement = self.partitions.create(
                info,
                name,
                lambda: self._place(
                    f"partition {name} of {path}", info.buckets, self._store.partition_count() + info.table_id, info.properties
                ),
                ignore_if_exists,
            )
        if placement is not None:
            assignment = TableAssignment(info.for_partition(partition), placement.leaders, placement.replicas)
            self._tell_new_leaders(assignment, lambda: self.partitions.undo(partition))
        return partition

    def drop_partition(self, path: TablePath, spec: Mapping[str, object], ignore_if_not_exists: bool = False) -> None:
        """Forget the partition; its tablet servers delete its local and remote logs.

        A lake-enabled table's partition is dropped only once the lake holds all of its log
        (else :class:`PartitionNotInLakeError`, retriable), and stays listed as ``lake_only``: a
        scan from the beginning reads it from the lake. Its writes are fenced before the check (see
        :mod:`lakelog.write_fence`), so no record acknowledged after the check goes with the log; a
        refused drop lifts the fence. The leaders are asked outside the lock."""
        info = self.table(path)
        name = self.partitions.name_of(info, spec)
        partition = self.partitions.find(info, name)
        if partition is not None and info.lake_enabled:
            self._check_lake_holds(info, partition)
        with self._lock:
            dropped = self.partitions.drop(info, name, ignore_if_not_exists)
        if dropped is not None:
            self._tell_leaders([], [dropped.partition_id])

    def _check_lake_holds(self, info: TableInfo, partition: PartitionInfo) -> None:
        """Fence the partition's writes, then raise :class:`PartitionNotInLakeError` (fence lifted)
        unless the lake holds every bucket of it up to the high watermark its leader reports."""
        leaders = self._store.partition_leaders(info.table_id).get(partition.partition_id, {})
        assignment = TableAssignment(info.for_partition(partition), leaders, self._store.bucket_replicas(partition.partition_id))
        nodes = {node.server_id: node for node in self._store.tablet_servers()}
        try:
            unfenced = self._tell_bucket_leaders(assignment, nodes, fenced_leaders(leaders))
            missing = unfenced or self._missing_from_lake(info, partition, describe_assignment(self._notifier, assignment, nodes))
        except BaseException:
            self._tell_bucket_leaders(assignment, nodes, leaders)
            raise
        if missing:
            for failure in self._tell_bucket_leaders(assignment, nodes, leaders):
                log.warning("%s: the fence stays until its leader registers again: %s", assignment.info.label, failure)
            raise PartitionNotInLakeError(
                f"partition {partition.partition_name} of {info.path} keeps its log until the lake holds all of it"
                f" ({'; '.join(missing)}); drop it again once the tiering job has tiered it"
            )

    def _tell_bucket_leaders(self, assignment: TableAssignment, nodes: Mapping[int, ServerNode], leaders: Mapping[int, int]) -> list[str]:
        """Tell each leader of ``assignment`` its buckets under the ids ``leaders`` gives them
        (fenced or plain); what failed, in words."""
        failures = []
        for server_id in sorted(set(assignment.leaders.values())):
            node = nodes.get(server_id)
            mine = {b: leaders[b] for b, leader in assignment.leaders.items() if leader == server_id}
            copies = {b: assignment.replicas[b] for b in mine if b in assignment.replicas}
            try:
                if node is None:
                    raise InvalidRequestError(f"tablet server {server_id} never registered")
                self._notifier.notify_leaders(node, [TableAssignment(assignment.info, mine, copies)], [])
            except Exception as exc:  # noqa: BLE001 - reported to the caller, who refuses the drop
                failures.append(f"buckets {sorted(mine)}: their leader {server_id} could not be told ({exc})")
        return failures

    def _missing_from_lake(self, info: TableInfo, partition: PartitionInfo, described: Mapping[int, BucketInfo]) -> list[str]:
        """What the lake lacks of each bucket of ``partition``, in words (nothing: it holds all)."""
        lake = self._store.lake_snapshot(info.table_id) or LakeSnapshot(-1)
        missing: list[str] = []
        for bucket, found in described.items():
            known = lake.bucket_offsets.get((partition.partition_id, bucket))
            lake_end = known.log_end_offset if known else 0
            if not found.leader_available:
                missing.append(f"bucket {bucket}: its leader {found.leader} did not answer")
            elif found.high_watermark > lake_end:
                missing.append(f"bucket {bucket}: the log ends at {found.high_watermark}, the lake at {lake_end}")
        return missing

    def list_partitions(self, path: TablePath) -> list[PartitionInfo]:
        return self.list_partitions_of(self.table(path))

    def list_partitions_of(self, info: TableInfo) -> list[PartitionInfo]:
        return self.partitions.list(info)

    def drop_table(self, path: TablePath, ignore_if_not_exists: bool = False) -> None:
        with self._lock:
            info = self._store.table_by_path(path)
            if info is None:
                if ignore_if_not_exists:
                    return
                raise TableNotExistError(f"table {path} does not exist")
            dropped = self._drop(info)
        self._tell_leaders([], dropped)

    def _drop(self, info: TableInfo) -> list[int]:
        """Forget the table (lock held) and return its partitions' ids, then its own (a tablet
        server closes a partition's logs before it deletes the table's directory around them);
        callers tell the tablet servers after releasing the lock, so an unreachable server never
        stalls the coordinator."""
        partitions = [p.partition_id for p in self._store.partitions(info.table_id)]
        self._store.delete_table(info.table_id)
        log.info("dropped table %s (id %d)", info.path, info.table_id)
        return [*partitions, info.table_id]

    def list_tables(self, database: str) -> list[str]:
        validate_name("database", database)
        if not self._store.database_exists(database):
            raise DatabaseNotExistError(f"database {database!r} does not exist")
        return [info.path.table for info in self._store.tables_in(database)]

    def tables(self) -> list[TableInfo]:
        """Every table, by id (the status page lists them all)."""
        return self._store.all_tables()

    def alter_table(self, path: TablePath, changes: Sequence[TableChange], ignore_if_not_exists: bool = False) -> int:
        """Apply ``changes`` as one new schema version and tell the leaders; its id (0 when the
        table does not exist and that is to be ignored). Every older version is kept: batches
        written under it stay valid, and readers conform them to the newest. A lake-enabled
        table's lake table is evolved first, so the next tiering round writes the new columns."""
        with self._lock:
            info = self._store.table_by_path(path)
            if info is None:
                if ignore_if_not_exists:
                    return 0
                raise TableNotExistError(f"table {path} does not exist")
            schema = apply_changes(info, changes)
            if info.lake_enabled:  # the lake first: a lake that cannot follow leaves the table as it was
                self._lake.evolve_table(path, schema)
            schema_id = self._store.alter_schema(info.table_id, schema)
            altered = self.table(path)
        log.info("altered table %s: schema %d is %s", path, schema_id, ", ".join(f"{c.kind} {c.name} {c.type}" for c in changes))
        self._tell_leaders(self.assignments(altered), [])
        return schema_id

    def table_schema(self, path: TablePath, schema_id: int) -> SchemaInfo:
        """Version ``schema_id`` of the table's schema (0: the current one)."""
        info = self.table(path)
        if schema_id == 0:
            return SchemaInfo(info.schema_id, info.schema)
        schema = self._store.table_schema(info.table_id, schema_id)
        if schema is None:
            raise SchemaNotExistError(f"table {path} has no schema {schema_id} (its schemas are 1..{info.schema_id})")
        return SchemaInfo(schema_id, schema)

    def table(self, path: TablePath) -> TableInfo:
        info = self._store.table_by_path(path)
        if info is None:
            raise TableNotExistError(f"table {path} does not exist")
        return info

    def table_by_id(self, table_id: int) -> TableInfo:
        info = self._store.table_by_id(table_id)
        if info is None:
            raise TableNotExistError(f"table id {table_id} does not exist")
        return info

    def assignment(self, info: TableInfo) -> TableAssignment:
        return TableAssignment(info, self._store.leaders(info.table_id), self._store.bucket_replicas(info.table_id))

    def assignments(self, info: TableInfo) -> list[TableAssignment]:
        """The table's own buckets, and for a partitioned table each partition's, with their leaders."""
        if not info.partitioned:
            return [self.assignment(info)]
        leaders = self._store.partition_leaders(info.table_id)
        return [self.assignment(info)] + [
            TableAssignment(info.for_partition(p), leaders.get(p.partition_id, {}), self._store.bucket_replicas(p.partition_id))
            for p in self._store.partitions(info.table_id)
        ]

    def assignment_by_id(self, physical_id: int) -> TableAssignment:
        """A table's or a partition's buckets and leaders, by its id (see ``TableInfo.physical_id``)."""
        info = self._store.table_by_id(physical_id)
        if info is not None:
            return self.assignment(info)
        found = self._store.partition_by_id(physical_id)
        if found is None:
            raise TableNotExistError(f"no table or partition has id {physical_id}")
        table_id, partition = found
        leaders = self._store.partition_leaders(table_id).get(physical_id, {})
        return TableAssignment(self.table_by_id(table_id).for_partition(partition), leaders, self._store.bucket_replicas(physical_id))

    def tablet_servers(self) -> list[ServerNode]:
        return self._store.tablet_servers()

    def tablet_server_heartbeat(self, server_id: int) -> None:
        if server_id not in {node.server_id for node in self._store.tablet_servers()}:
            raise InvalidRequestError(f"tablet server {server_id} heartbeats but never registered")
        self.liveness.heartbeat(server_id)

    # lake

    def lake_config(self) -> LakeConfig:
        """The lake's format and catalog properties, secrets included: callers send ``.public()``."""
        return self._lake.config

    def lake_table_stats(self, info: TableInfo) -> LakeTableStats | None:
        """The numbers of a lake-enabled table's lake table (see :meth:`LakeTables.stats`)."""
        return self._lake.stats(info)

    def lake_snapshot(self, table_id: int) -> LakeSnapshot:
        snapshot = self._store.lake_snapshot(table_id)
        if snapshot is None:
            info = self.table_by_id(table_id)
            raise LakeSnapshotNotExistError(f"table {info.path} has no lake snapshot yet: no tiering round has committed")
        return snapshot

    def commit_lake_snapshot(self, table_id: int, snapshot: LakeSnapshot) -> LakeCommit:
        """Record a lake snapshot the tiering job committed to Iceberg, then tell the bucket leaders.

        Refused if it would move any bucket's lake end offset backwards: the coordinator already
        holds a newer snapshot, which a racing job committed after this one. Sending the snapshot it
        holds again is accepted (a job that restarts after a lost reply does that).
        """
        with self._lock:
            info = self.table_by_id(table_id)
            if not info.lake_enabled:
                raise InvalidRequestError(f"table {info.path} is not lake-enabled")
            current = self._store.lake_snapshot(table_id) or LakeSnapshot(-1)
            self._check_lake_buckets(info, snapshot, current)
            for bucket, offsets in snapshot.bucket_offsets.items():
                known = current.bucket_offsets.get(bucket)
                if known is not None and offsets.log_end_offset < known.log_end_offset:
                    raise StaleLakeSnapshotError(
                        f"{info.path} bucket {bucket}: lake snapshot {snapshot.snapshot_id} ends at offset"
                        f" {offsets.log_end_offset}, behind snapshot {current.snapshot_id} (end {known.log_end_offset})"
                    )
            self._store.put_lake_snapshot(table_id, snapshot)
        log.info("table %s: lake snapshot %d committed (%s)", info.path, snapshot.snapshot_id, _ends(snapshot))
        with self._lake_notify_lock:
            latest = self.lake_snapshot(table_id)
            leaders = self._log_leaders(info)
            for node in self._store.tablet_servers():
                mine = _led_by(node.server_id, table_id, latest, leaders)
                if not mine:
                    continue
                try:
                    self._notifier.notify_lake_offsets(node, mine)
                except Exception as exc:  # noqa: BLE001 - a server that misses this learns the offsets when it registers
                    log.warning(
                        "could not tell tablet server %d at %s the lake offsets of %s: %s", node.server_id, node.address, info.path, exc
                    )
        return LakeCommit(info.path, _records_added(current, snapshot))

    def _check_lake_buckets(self, info: TableInfo, snapshot: LakeSnapshot, current: LakeSnapshot) -> None:
        """Every bucket of ``snapshot`` is one of the table's, or of a partition the table has or had
        in the lake (a partition the log dropped keeps its lake range), and holds a range."""
        partitions = {p.partition_id for p in self._store.partitions(info.table_id)} | {
            pid for pid, _ in map(split_lake_bucket_key, current.bucket_offsets) if pid is not None
        }
        for key, offsets in snapshot.bucket_offsets.items():
            partition_id, bucket = split_lake_bucket_key(key)
            if info.partitioned and partition_id not in partitions:
                raise InvalidRequestError(f"{info.path} has no partition with id {partition_id} (lake bucket {key})")
            if not info.partitioned and partition_id is not None:
                raise InvalidRequestError(f"{info.path} has no partitions, but lake bucket {key} names partition {partition_id}")
            if not 0 <= bucket < info.buckets:
                raise InvalidRequestError(f"{info.path} has no bucket {bucket} (it has buckets 0..{info.buckets - 1})")
            if not 0 <= offsets.log_start_offset <= offsets.log_end_offset:
                raise InvalidRequestError(f"{info.path} bucket {key}: lake range {offsets} is not a range")

    def _log_leaders(self, info: TableInfo) -> dict[int | None, dict[int, int]]:
        """Per partition id (None: the table's own buckets), per bucket, its leader."""
        leaders: dict[int | None, dict[int, int]] = {None: self._store.leaders(info.table_id)}
        if info.partitioned:
            leaders.update(self._store.partition_leaders(info.table_id))
        return leaders

    # tablet servers

    def register_tablet_server(self, node: ServerNode) -> tuple[list[TableAssignment], list[LakeOffsets]]:
        """Record a (re)starting tablet server; return, in one pass over the tables, every bucket it
        leads or copies and what of them the lake already holds. A restarted server may have lost
        what it had not flushed (or its whole disk): it leaves every ISR first, and its buckets get
        new leaders (see :mod:`replica_election`); it rejoins each ISR once it has caught up."""
        self._store.upsert_tablet_server(node)
        self._server_lost(node.server_id, returning=True)
        self.liveness.heartbeat(node.server_id)
        led: list[TableAssignment] = []
        lake: list[LakeOffsets] = []
        for info in self._store.all_tables():
            assignments = self.assignments(info)
            led += [a for a in assignments[1:] + assignments[:1] if node.server_id in _servers_of(a)]
            snapshot = self._store.lake_snapshot(info.table_id) if info.lake_enabled else None
            if snapshot is not None:
                lake += _led_by(node.server_id, info.table_id, snapshot, self._log_leaders(info))
        log.info("tablet server %d registered at %s, leading buckets of %d table(s)", node.server_id, node.address, len(led))
        return led, lake

    # replication

    def adjust_isr(self, leader_id: int, physical_id: int, bucket: int, leader_epoch: int, isr_version: int, isr: Sequence[int]) -> BucketReplicas:
        """A leader's ISR change: accepted only from the bucket's current leader naming the current
        leader epoch and ISR version (anything else is stale: NotLeaderError); the new ISR keeps
        the leader, names only replicas, and adds no server that is down."""
        with self._lock:
            assignment = self.assignment_by_id(physical_id)
            current = assignment.replicas.get(bucket)
            where = f"{assignment.info.label} bucket {bucket}"
            if current is None:
                raise InvalidRequestError(f"{where} has no replicas to change the ISR of")
            leader = assignment.leaders.get(bucket)
            if leader != leader_id or current.leader_epoch != leader_epoch or current.isr_version != isr_version:
                raise NotLeaderError(
                    f"{where}: ISR change from server {leader_id} in leader epoch {leader_epoch} (ISR version {isr_version}) is stale:"
                    f" the leader is {leader} in epoch {current.leader_epoch} (ISR version {current.isr_version})"
                )
            wanted = tuple(r for r in current.replicas if r in set(isr))
            down = self.liveness.down() & (set(wanted) - set(current.isr))
            if leader_id not in wanted or len(wanted) != len(set(isr)) or down:
                raise InvalidRequestError(f"{where}: ISR {list(isr)} must hold the leader {leader_id} and live replicas of {list(current.replicas)}")
            updated = BucketReplicas(current.replicas, wanted, current.leader_epoch, current.isr_version + 1)
            self._store.update_bucket(physical_id, bucket, leader_id, updated)
            if len(wanted) > len(current.isr):
                self._isr_grew.set()
        log.info("%s: ISR %s -> %s (leader %d, epoch %d)", where, list(current.isr), list(wanted), leader_id, current.leader_epoch)
        return updated

    def offline_buckets(self) -> int:
        """Buckets (of tables and partitions) whose leader is down now."""
        down = self.liveness.down()
        if not down:
            return 0
        return sum(leader in down for info in self._store.all_tables() for a in self.assignments(info) for leader in a.leaders.values())

    def check_liveness(self) -> None:
        """Log servers going down or coming back, and take each newly down server out of every ISR
        at once, electing new leaders for the buckets it led (called periodically)."""
        down = self.liveness.check()
        for server_id in sorted(down - self._handled_down):
            self._server_lost(server_id, returning=False)
        for server_id in sorted(self._handled_down - down):
            self._server_back(server_id)
        self._handled_down = down
        with self._lock:
            missed, self._missed_notices = self._missed_notices - down, set()
        for server_id in sorted(missed):
            self._server_back(server_id)
        if self._isr_grew.is_set():
            self._isr_grew.clear()
            self._return_preferred_leaders(down)

    def _return_preferred_leaders(self, down: set[int]) -> None:
        """Hand every replicated bucket back to its first replica once that one is in sync again, so
        leaders stay spread as placed (Kafka's preferred leader election)."""
        live = {node.server_id for node in self._store.tablet_servers()} - down
        for assignment in self._move_buckets(lambda leader, copies: preferred_leader(leader, copies, live)):
            log.info("%s: leaders back on their preferred servers: %s", assignment.info.label, dict(assignment.leaders))
            self._tell_replicas(assignment, set())

    def _server_back(self, server_id: int) -> None:
        """A server heartbeats again without having restarted (it was paused, or cut off), or a
        change did not reach it: it missed changes, so it is told its replicated buckets as they
        are now. A replaced leader learns it follows, so it cuts what it appended alone and copies
        the rest."""
        with self._lock:
            held = [
                a for info in self._store.all_tables() for a in self.assignments(info)
                if any(server_id in copies.replicas for copies in a.replicas.values())
            ]
        node = next((n for n in self._store.tablet_servers() if n.server_id == server_id), None)
        if node is not None and held:
            self._notify_replicas(node, held)

    def _server_lost(self, server_id: int, returning: bool) -> None:
        """Move every replicated bucket off ``server_id`` (see :mod:`replica_election`) and tell the
        servers that still hold it."""
        live = {node.server_id for node in self._store.tablet_servers()} - self.liveness.down() - {server_id}
        if returning:
            live.add(server_id)
        changed = self._move_buckets(lambda leader, copies: without_server(leader, copies, server_id, live, returning))
        skip = set() if returning else {server_id}
        for assignment in changed:
            log.info(
                "tablet server %d %s: %s now led by %s, ISR %s", server_id, "restarted" if returning else "lost", assignment.info.label,
                dict(assignment.leaders), {b: r.isr for b, r in assignment.replicas.items()},
            )
            self._tell_replicas(assignment, skip)

    def _move_buckets(self, decide: Callable[[int, BucketReplicas], tuple[int, BucketReplicas] | None]) -> list[TableAssignment]:
        """Apply ``decide(leader, copies)`` (a new leader and replicas, or None) to every replicated
        bucket, store what changed; the tables and partitions changed, as they are now."""
        changed: list[TableAssignment] = []
        with self._lock:
            for info in self._store.all_tables():
                for assignment in self.assignments(info):
                    leaders, replicas = dict(assignment.leaders), dict(assignment.replicas)
                    for bucket, copies in assignment.replicas.items():
                        moved = decide(leaders[bucket], copies)
                        if moved is not None:
                            leaders[bucket], replicas[bucket] = moved
                            self._store.update_bucket(assignment.info.physical_id, bucket, *moved)
                    if replicas != assignment.replicas:
                        changed.append(TableAssignment(assignment.info, leaders, replicas))
        return changed

    def _tell_replicas(self, assignment: TableAssignment, skip: set[int]) -> None:
        """Tell every server holding a bucket of ``assignment`` (leaders first, so a follower's
        first question finds its leader ready), except ``skip`` and servers down."""
        nodes = {node.server_id: node for node in self._store.tablet_servers()}
        leaders = set(assignment.leaders.values())
        order = sorted(_servers_of(assignment) - skip - self.liveness.down(), key=lambda s: (s not in leaders, s))
        for server_id in order:
            node = nodes.get(server_id)
            if node is not None:
                self._notify_replicas(node, [assignment])

    def _notify_replicas(self, node: ServerNode, assignments: list[TableAssignment]) -> None:
        """Queue a replica change for ``node`` (see ``_replica_notices``)."""

        def send() -> None:
            try:
                self._notifier.notify_leaders(node, assignments, [])
            except Exception as exc:  # noqa: BLE001 - told again on the next liveness check, or when it is back or registers
                log.warning("could not tell tablet server %d at %s about %s: %s", node.server_id, node.address, assignments[0].info.label, exc)
                with self._lock:
                    self._missed_notices.add(node.server_id)

        with self._lock:
            queue = self._replica_notices.get(node.server_id)
            if queue is None:
                queue = self._replica_notices[node.server_id] = ThreadPoolExecutor(1, thread_name_prefix=f"notify-{node.server_id}")
        queue.submit(send)

    def close(self) -> None:
        """Stop sending replica changes (what is queued is dropped: servers learn it when they register)."""
        with self._lock:
            queues, self._replica_notices = list(self._replica_notices.values()), {}
        for queue in queues:
            queue.shutdown(wait=False, cancel_futures=True)

    def _tell_new_leaders(self, assignment: TableAssignment, undo: Callable[[], list[int]]) -> None:
        """Tell the leaders of a table or partition just created. One that answers that it could not
        take its buckets (``StorageError``: its open files or its disk exhausted, or any other
        failure) has the creation undone (``undo``, under the lock: the ids to drop) and the caller
        gets the error, so no table is answered OK that its leader cannot write; one that cannot be
        reached in time learns its buckets on its next request or when it registers again."""
        for node in self._store.tablet_servers():
            if node.server_id not in _servers_of(assignment):
                continue
            try:
                self._notifier.notify_leaders(node, [assignment], [])
            except (NetworkError, RequestTimeoutError) as exc:
                log.warning("could not notify tablet server %d at %s: %s", node.server_id, node.address, exc)
            except LakelogError as error:
                with self._lock:
                    dropped = undo()
                self._tell_leaders([], dropped)
                log.warning("%s is not created: tablet server %d could not take its buckets: %s", assignment.info.label, node.server_id, error.message)
                refusal = StorageError if isinstance(error, StorageError) else UnknownServerError
                raise refusal(
                    f"cannot create {assignment.info.label}: tablet server {node.server_id} could not take its buckets"
                    f" ({error.message}); it is not created"
                ) from None

    def _tell_leaders(self, tables: Sequence[TableAssignment], dropped: Sequence[int]) -> None:
        """Best effort: a tablet server that misses this learns its buckets on its next request or restart."""
        for node in self._store.tablet_servers():
            mine = [t for t in tables if node.server_id in _servers_of(t)]
            if not mine and not dropped:
                continue
            try:
                self._notifier.notify_leaders(node, mine, dropped)
            except Exception as exc:  # noqa: BLE001 - any failure here is retried by the tablet server itself
                log.warning("could not notify tablet server %d at %s: %s", node.server_id, node.address, exc)


def _led_by(server_id: int, table_id: int, snapshot: LakeSnapshot, leaders: Mapping[int | None, Mapping[int, int]]) -> list[LakeOffsets]:
    """What ``server_id`` must know of ``snapshot``: per table or partition it leads buckets of,
    their lake ranges (``leaders``: per partition id, None for the table's own, per bucket)."""
    by_log: dict[int | None, dict[LakeBucketKey, LakeBucketOffset]] = {}
    for key, offsets in snapshot.bucket_offsets.items():
        partition_id, bucket = split_lake_bucket_key(key)
        if leaders.get(partition_id, {}).get(bucket) == server_id:
            by_log.setdefault(partition_id, {})[bucket] = offsets
    return [LakeOffsets(table_id, LakeSnapshot(snapshot.snapshot_id, buckets), pid) for pid, buckets in by_log.items()]


def _servers_of(assignment: TableAssignment) -> set[int]:
    """The servers that lead or copy a bucket of ``assignment``."""
    return {*assignment.leaders.values(), *(server for r in assignment.replicas.values() for server in r.replicas)}


def _copies(placement: Placement) -> str:
    return f", replicas {({b: r.replicas for b, r in placement.replicas.items()})}" if placement.replicas else ""


def _records_added(before: LakeSnapshot, after: LakeSnapshot) -> int:
    total = 0
    for bucket, offsets in after.bucket_offsets.items():
        known = before.bucket_offsets.get(bucket)
        total += offsets.log_end_offset - max(offsets.log_start_offset, known.log_end_offset if known else 0)
    return total


def _ends(snapshot: LakeSnapshot) -> str:
    return ", ".join(f"bucket {b} [{o.log_start_offset}, {o.log_end_offset})" for b, o in sorted(snapshot.bucket_offsets.items()))
