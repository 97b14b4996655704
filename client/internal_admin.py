"""The coordinator and tablet-server calls lakelog's own parts make, not its users: writer ids for
the writers, and the tiering job's protocol (barrier safe time, heartbeats, lake commits). Apart
from :class:`~lakelog.client.admin.Admin`, so the user's admin shows only what a user calls."""

from __future__ import annotations

from typing import Iterable

from lakelog.client.rpc.coordinator_gateway import CoordinatorGateway
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.tablet_gateway import TabletGateway
from lakelog.errors import InvalidRequestError
from lakelog.metadata import LakeSnapshot, TablePath
from lakelog.security.writer_tokens import WriterIdentity


class InternalAdmin:
    def __init__(self, coordinator: CoordinatorGateway, tablets: TabletGateway, router: LeaderRouter) -> None:
        self._coordinator = coordinator
        self._tablets = tablets
        self._router = router
        self._metadata = router.metadata

    def init_writer(self) -> WriterIdentity:
        """A new idempotent writer id from the coordinator, with the token that proves it is this
        caller's. Resending is safe: an id lost with its answer is never handed out again, and
        none is needed back."""
        return self._router.call(self._coordinator.init_writer, "init writer", resend_safe=True)

    def barrier_safe_time(self, paths: Iterable[TablePath]) -> int:
        """The smallest GetServerTime of the tablet servers leading the tables' buckets: a time
        every one of them has passed, so no record stamped at or before it is still to come. The
        tiering job takes its barrier from here, not from its own clock."""
        tables = [self._metadata.table(path) for path in paths]
        if not tables:
            raise InvalidRequestError("a barrier needs at least one table")
        # A partitioned table's buckets are its partitions': it leads none of its own.
        infos = [info for info in tables if not info.partitioned] + [
            p for info in tables if info.partitioned for p in self._metadata.partitions(info, refresh=True).values()
        ]

        def read() -> int:
            servers = {node for info in infos for node in self._router.by_leader(info, None)}
            # No bucket yet (partitioned tables without partitions): any record to come is stamped
            # by some tablet server, so every one of them must have passed the time.
            return min(self._tablets.get_server_time(node) for node in servers or self._metadata.tablet_servers())

        return self._router.call(read, "read the tablet servers' time", resend_safe=True, tables=[i.table_id for i in infos])

    def tiering_heartbeat(self, job_id: str, tables: Iterable[TablePath], barrier: int) -> None:
        """A tiering job's report after a round: the coordinator keeps the last one."""
        reported = list(tables)
        self._router.call(lambda: self._coordinator.tiering_heartbeat(job_id, reported, barrier), "tiering heartbeat", resend_safe=True)

    def commit_lake_snapshot(self, path: TablePath, snapshot: LakeSnapshot) -> None:
        """Tell the coordinator about a lake snapshot the tiering job committed to the lake.
        Resending is safe: the coordinator keeps the newest snapshot and ignores one it holds.

        Raises :class:`StaleLakeSnapshotError` if the coordinator already holds a newer one.
        """
        info = self._metadata.table(path)
        self._router.call(lambda: self._coordinator.commit_lake_snapshot(info.table_id, snapshot), "commit lake snapshot", resend_safe=True)
