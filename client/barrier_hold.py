"""A barrier hold, the writer's side: no tiering barrier falls between the writes made under it.

    with conn.open_barrier_hold() as hold:
        with orders.new_append().create_writer(hold=hold) as o, lines.new_append().create_writer(hold=hold) as l:
            o.append(order)
            l.append(line)
    # every consistent lake cut (admin.get_consistent_lake_snapshots) holds both rows or neither

Opening asks every tablet server to keep its barrier-safe time below the hold's start, then gives
each the smallest start any of them answered, so skew between their clocks cannot split the writes.
Closing flushes the hold's writers and tells every server the latest commit timestamp its appends
got; each server keeps the cap until its own clock has passed it. See
:mod:`lakelog.server.replica.barrier_holds`. A hold is not a transaction: nothing is rolled back.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import TYPE_CHECKING

from lakelog.errors import BarrierHoldError, LakelogError, NoTabletServerError
from lakelog.cluster_state import ServerNode
from lakelog.client.rpc.leader_router import LeaderRouter
from lakelog.client.rpc.tablet_gateway import TabletGateway

if TYPE_CHECKING:
    from lakelog.client.writer import AppendWriter

log = logging.getLogger(__name__)


class BarrierHold:
    def __init__(self, tablets: TabletGateway, router: LeaderRouter, timeout_ms: int) -> None:
        self.hold_id = uuid.uuid4().hex
        self._tablets = tablets
        self._router = router
        self._timeout_ms = timeout_ms
        self._servers = router.call(router.metadata.tablet_servers, "list the tablet servers", resend_safe=True)
        if not self._servers:
            raise NoTabletServerError("a barrier hold needs at least one registered tablet server")
        self._writers: list[AppendWriter] = []
        self._latest_stamp = 0
        self._closed = False
        self._lock = threading.Lock()
        opened: list[ServerNode] = []
        try:
            starts = {}
            for node in self._servers:
                starts[node] = self._open(node, 0)
                opened.append(node)
            self.start = min(starts.values())
            for node, start in starts.items():
                if start > self.start:
                    self._open(node, self.start)
        except LakelogError:
            self._release(opened)  # best effort: the error that stopped the opening is the one to raise
            raise
        log.debug("barrier hold %s open on %d tablet server(s) from %d", self.hold_id, len(self._servers), self.start)

    def _open(self, node: ServerNode, start_ms: int) -> int:
        """Opening again under the same id only lowers the hold's start, so it is safe to resend."""
        return self._router.call(
            lambda: self._tablets.open_barrier_hold(node, self.hold_id, self._timeout_ms, start_ms),
            f"open barrier hold {self.hold_id} on {node.address}",
            resend_safe=True,
        )

    def attach(self, writer: AppendWriter) -> None:
        """``writer`` appends under this hold; :meth:`close` flushes it first."""
        with self._lock:
            if self._closed:
                raise BarrierHoldError(f"barrier hold {self.hold_id} is closed; open a new one to write under")
            self._writers.append(writer)

    def stamped(self, commit_timestamp: int) -> None:
        """An append under the hold was acknowledged with this commit timestamp."""
        with self._lock:
            self._latest_stamp = max(self._latest_stamp, commit_timestamp)

    def close(self) -> None:
        """Flush the hold's writers, then release the hold on every server. Raises the first
        failure; :class:`BarrierHoldError` means a server lost the hold (expired or restarted)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            for writer in self._writers:
                writer.flush()
        finally:
            errors = self._release(self._servers)
        if errors:
            raise errors[0]

    def _release(self, servers: list[ServerNode]) -> list[LakelogError]:
        errors: list[LakelogError] = []
        for node in servers:
            try:
                self._router.call(
                    lambda: self._tablets.close_barrier_hold(node, self.hold_id, self._latest_stamp),
                    f"close barrier hold {self.hold_id} on {node.address}",
                    resend_safe=False,
                )
            except LakelogError as error:
                errors.append(error)
        return errors

    def __enter__(self) -> "BarrierHold":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
