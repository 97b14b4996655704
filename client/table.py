"""A table handle and the builders of its writers and scanners."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pyarrow as pa

from lakelog.security.writer_tokens import WriterIdentity
from lakelog.config import Configuration
from lakelog.errors import BarrierHoldError, InvalidConfigError, InvalidPartitionError, InvalidRequestError, LakeSnapshotNotExistError, PartitionNotExistError
from lakelog.metadata import LakeSnapshot, TableInfo, TablePath, validate_name
from lakelog.client.admin import Admin
from lakelog.client.internal_admin import InternalAdmin
from lakelog.client.barrier_hold import BarrierHold
from lakelog.client.group.group_membership import GroupMembership
from lakelog.client.group.group_scanner import GroupLogScanner
from lakelog.client.lake.lake_sources import LakeSources
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.tablet_gateway import TabletGateway
from lakelog.client.scanner.log_scanner import LogScanner
from lakelog.client.partition_writer import PartitionedAppendWriter
from lakelog.client.record_accumulator import AppendAck
from lakelog.client.sender import Sender
from lakelog.client.writer import AppendWriter


class Table:
    def __init__(
        self,
        info: TableInfo,
        tablets: TabletGateway,
        router: LeaderRouter,
        admin: Admin,
        internal_admin: InternalAdmin,
        conf: Configuration,
        sender: Sender,
        lake: LakeSources | None = None,
    ) -> None:
        """``sender``: the connection's, which sends every writer's batches."""
        self.info = info
        self._lake = lake
        self._sender = sender
        self._tablets = tablets
        self._router = router
        self._admin = admin
        self._internal_admin = internal_admin
        self._conf = conf

    @property
    def path(self) -> TablePath:
        return self.info.path

    @property
    def schema(self) -> pa.Schema:
        return self.info.schema

    def partition(self, name: str) -> "Table":
        """The handle of one partition of a partitioned table: its writers and scanners work on that
        partition's buckets alone, as on a table's."""
        if not self.info.partitioned:
            raise InvalidPartitionError(f"table {self.path} is not partitioned")
        found = self._router.metadata.partitions(self.info, refresh=True).get(name)
        if found is None:
            raise PartitionNotExistError(f"table {self.path} has no partition {name!r}")
        return Table(found, self._tablets, self._router, self._admin, self._internal_admin, self._conf, self._sender, self._lake)

    def new_append(self) -> "TableAppend":
        return TableAppend(self)

    def new_scan(self) -> "TableScan":
        return TableScan(self)

    def writer(
        self, on_ack: Callable[[AppendAck], None] | None, hold: BarrierHold | None, blocking: bool = True
    ) -> AppendWriter | PartitionedAppendWriter:
        """A writer of this table (see :meth:`TableAppend.create_writer`); not ``blocking``: its
        appends never wait for room (an asyncio writer awaits it)."""
        identity = self._identity(hold)
        if self.info.partitioned:  # also on a partition's handle: each row goes where its key value says
            # One writer id for every partition: sequences are kept per bucket log, and each
            # partition's buckets are logs of their own.
            return PartitionedAppendWriter(
                self.info,
                lambda linger_first: self._append_writer(on_ack, hold, identity, blocking, linger_first),
                self._admin,
                self._router.metadata,
                self._conf,
            )
        return self._append_writer(on_ack, hold, identity, blocking)

    def _identity(self, hold: BarrierHold | None) -> WriterIdentity | None:
        """The writer's id from the coordinator, which makes it idempotent; none with ``acks=0``,
        as Kafka turns idempotence off there: nothing is resent, and a batch refused and dropped
        would leave a gap in the sequence that has every later batch refused. A barrier hold is
        released after the last commit timestamp its writers were acknowledged with, which
        ``acks=0`` never learns: refused."""
        if self._conf.get("client.writer.acks") != "0":
            return self._internal_admin.init_writer()
        if hold is not None:
            raise InvalidConfigError(
                f"a writer of {self.path} under a barrier hold needs its appends acknowledged: client.writer.acks is 0, use 1 or all"
            )
        return None

    def _append_writer(
        self,
        on_ack: Callable[[AppendAck], None] | None,
        hold: BarrierHold | None,
        identity: WriterIdentity | None,
        blocking: bool,
        linger_first: Callable[[float], float] | None = None,
    ) -> AppendWriter:
        writer = AppendWriter(self.info, self._sender, self._router, self._conf, on_ack, hold, identity, linger_first, blocking)
        if hold is not None:
            try:
                hold.attach(writer)
            except BarrierHoldError:
                writer.close()
                raise
        return writer

    def scanner(self, projection: list[int] | None, group: str | None = None) -> LogScanner:
        """A scanner of this table; with ``group``, a member of that consumer group."""
        make: Callable[..., LogScanner] = LogScanner if group is None else self._group_scanner(group)
        lake = self._lake
        source = lake.log_source(self.info) if lake is not None else None
        remote_conf = (lambda: lake.with_remote_settings(self._conf)) if lake is not None else None
        if not (self.info.partitioned and self.info.partition_id is None) or source is None:
            return make(self.info, projection, self._tablets, self._router, self._admin, self._conf, source, remote_conf)

        def lake_only() -> dict[int, TableInfo]:
            return {p.partition_id: self.info.for_partition(p) for p in self._admin.list_partition_infos(self.path) if p.lake_only}

        def snapshot() -> LakeSnapshot:
            """The lake snapshot covers every partition."""
            try:
                return self._admin.get_lake_snapshot(self.path)
            except LakeSnapshotNotExistError:  # dropped empty before any tiering round: nothing to read
                return LakeSnapshot(-1)

        return make(self.info, projection, self._tablets, self._router, self._admin, self._conf, source, remote_conf, lake_only, snapshot)


    def _group_scanner(self, group_id: str) -> Callable[..., GroupLogScanner]:
        """What builds a member's scanner from a :class:`LogScanner`'s arguments."""
        validate_name("group", group_id)
        calls = self._admin.groups
        session_ms: int = self._conf.get("client.scanner.group.session-timeout")

        def make(info: TableInfo, *scanner_args: Any) -> GroupLogScanner:
            return GroupLogScanner(
                lambda table_id: GroupMembership(calls, group_id, table_id, session_ms),
                lambda: calls.offsets(group_id, info.table_id),
                self._conf,
                info,
                *scanner_args,
            )

        return make


class TableAppend:
    def __init__(self, table: Table) -> None:
        self._table = table

    def create_writer(
        self, on_ack: Callable[[AppendAck], None] | None = None, hold: BarrierHold | None = None
    ) -> AppendWriter | PartitionedAppendWriter:
        """``on_ack`` receives every acknowledged append's offsets and commit timestamp. With ``hold``
        (:meth:`Connection.open_barrier_hold`), no tiering barrier falls between the writer's appends
        and those of the hold's other writers."""
        return self._table.writer(on_ack, hold)


class TableScan:
    def __init__(self, table: Table, projection: list[int] | None = None) -> None:
        self._table = table
        self._projection = projection

    @property
    def projection(self) -> list[int] | None:
        """The columns' indexes (None: every column)."""
        return self._projection

    def project(self, columns: Sequence[str | int]) -> "TableScan":
        """Only these columns (names or indexes), in this order."""
        schema = self._table.schema
        indexes = []
        for column in columns:
            if isinstance(column, int):
                if not 0 <= column < len(schema):
                    raise InvalidRequestError(f"{self._table.path} has no column index {column}")
                indexes.append(column)
            else:
                index = schema.get_field_index(column)
                if index < 0:
                    raise InvalidRequestError(f"{self._table.path} has no column {column!r}; columns are {schema.names}")
                indexes.append(index)
        if not indexes:
            raise InvalidRequestError("project() needs at least one column")
        return TableScan(self._table, indexes)

    def create_log_scanner(self, group: str | None = None) -> LogScanner:
        """A scanner of the table; with ``group``, it joins that consumer group: the group shares
        the table's buckets among its members, and commits on the coordinator where each stopped."""
        return self._table.scanner(self._projection, group)
