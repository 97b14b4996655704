"""Consumer groups as the client sees them: the calls a member makes and the admin's group calls
(list, describe, list offsets, reset), which :class:`~lakelog.client.admin.Admin` delegates here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from lakelog.consumer_groups import GroupBucket, GroupDescription, GroupSummary, HeartbeatAnswer
from lakelog.metadata import OffsetSpec, TablePath, validate_name
from lakelog.client.rpc.coordinator_gateway import CoordinatorGateway
from lakelog.client.rpc.leader_router import LeaderRouter

if TYPE_CHECKING:
    from lakelog.client.admin import Admin


class GroupAdmin:
    def __init__(self, coordinator: CoordinatorGateway, router: LeaderRouter, admin: "Admin") -> None:
        self._coordinator = coordinator
        self._router = router
        self._admin = admin

    # a member's calls

    def heartbeat(
        self, group_id: str, member_id: str, member_epoch: int, table_id: int, session_timeout_ms: int, owned: Iterable[GroupBucket], client_id: str
    ) -> HeartbeatAnswer:
        """One attempt: the membership heartbeats again on its own schedule."""
        return self._coordinator.group_heartbeat(group_id, member_id, member_epoch, table_id, session_timeout_ms, owned, client_id)

    def commit(self, group_id: str, member_id: str, member_epoch: int, table_id: int, offsets: dict[GroupBucket, int]) -> None:
        """Storing the same offsets again changes nothing, so a commit is resent like a lookup."""
        self._router.call(
            lambda: self._coordinator.commit_group_offsets(group_id, member_id, member_epoch, table_id, offsets), "commit group offsets", resend_safe=True
        )

    # the admin's calls

    def list_groups(self) -> list[GroupSummary]:
        return self._router.call(self._coordinator.list_groups, "list groups", resend_safe=True)

    def describe_group(self, group_id: str) -> GroupDescription:
        validate_name("group", group_id)
        return self._router.call(lambda: self._coordinator.describe_group(group_id), "describe group", resend_safe=True)

    def list_group_offsets(self, group_id: str, path: TablePath) -> dict[Any, int]:
        """``{bucket key: next offset}``, keyed as a scanner's positions."""
        info = self._admin.get_table_info(path)
        return {bucket.public_key(): offset for bucket, offset in sorted(self.offsets(group_id, info.table_id).items())}

    def offsets(self, group_id: str, table_id: int) -> dict[GroupBucket, int]:
        """The group's committed offsets of a table."""
        validate_name("group", group_id)
        return self._router.call(lambda: self._coordinator.list_group_offsets(group_id, table_id), "list group offsets", resend_safe=True)

    def reset_group_offsets(self, group_id: str, path: TablePath, spec: OffsetSpec) -> dict[Any, int]:
        """Set every bucket's committed offset (every partition's) where ``spec`` points now,
        lake included; refused while the group has members. Returns what was set."""
        validate_name("group", group_id)
        info = self._admin.get_table_info(path)
        offsets: dict[GroupBucket, int] = {}
        if info.partitioned:
            for partition in self._admin.list_partition_infos(path):
                found = self._admin.list_offsets(path, spec=spec, partition_name=partition.partition_name)
                offsets.update({GroupBucket(info.table_id, partition.partition_id, b): o for b, o in found.items()})
        else:
            offsets = {GroupBucket(info.table_id, 0, b): o for b, o in self._admin.list_offsets(path, spec=spec).items()}
        self._router.call(
            lambda: self._coordinator.reset_group_offsets(group_id, info.table_id, offsets), "reset group offsets", resend_safe=True
        )
        return {bucket.public_key(): offset for bucket, offset in sorted(offsets.items())}
