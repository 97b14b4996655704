"""Internal RPCs are for cluster members only, with user authentication off:
the embedded server's self-generated secret, and ``cluster.secret`` for processes apart."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Callable

import grpc
import pytest

import lakelog
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceStub, TabletServiceStub
from lakelog.server.server_process import ServerProcess
from tests.harness.membership import member_metadata
from tests.harness.tables import create_table, order_rows, scan_all


def tablet_server_0(address: str) -> tuple[str, int]:
    with grpc.insecure_channel(address) as channel:
        nodes = CoordinatorServiceStub(channel).GetMetadata(pb.MetadataRequest()).tablet_servers
    node = next(n for n in nodes if n.node_id == 0)
    return node.host, node.port


def refused(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "for the servers of this cluster only" in info.value.details()
    return info.value


def test_an_unauthenticated_register_can_no_longer_move_tablet_server_0(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    server = server_factory(tmp_path / "data")
    with lakelog.connect(server.address) as conn:
        table = create_table(conn)
        with table.new_append().create_writer() as writer:
            writer.append_arrow(order_rows(0, 100))
    before = tablet_server_0(server.address)
    hijack = pb.RegisterTabletServerRequest(server=pb.PbServerNode(node_id=0, host="127.0.0.1", port=1))
    notify = pb.NotifyLakeTableOffsetRequest(
        notify_buckets_req=[pb.PbNotifyLakeTableOffsetReqForBucket(table_id=table.info.table_id, log_end_offset=100)]
    )
    with grpc.insecure_channel(server.address) as channel:
        refused(lambda: CoordinatorServiceStub(channel).RegisterTabletServer(hijack))
        wrong = (("lakelog-cluster-secret", "guess"),)
        refused(lambda: CoordinatorServiceStub(channel).RegisterTabletServer(hijack, metadata=wrong))
        refused(lambda: TabletServiceStub(channel).NotifyLeaderAndIsr(pb.NotifyLeaderAndIsrRequest(dropped_table_id=[table.info.table_id])))
        refused(lambda: TabletServiceStub(channel).NotifyLakeTableOffset(notify))
    assert tablet_server_0(server.address) == before
    with lakelog.connect(server.address) as conn:  # produce still reaches the real tablet server
        table = conn.get_table(table.path)
        with table.new_append().create_writer() as writer:
            writer.append_arrow(order_rows(100, 100))
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            assert scan_all(scanner, 200).column("id").to_pylist() == list(range(200))

    secret_file = tmp_path / "data" / "cluster-secret"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    secret = secret_file.read_text()
    server.stop()
    restarted = server_factory(tmp_path / "data")  # the same secret after a restart
    assert secret_file.read_text() == secret
    with grpc.insecure_channel(restarted.address) as channel:  # a member's call passes
        answer = CoordinatorServiceStub(channel).RegisterTabletServer(
            pb.RegisterTabletServerRequest(server=pb.PbServerNode(node_id=0, host=before[0], port=restarted.port)),
            metadata=member_metadata(restarted),
        )
    assert [m.table_info.table_path.table_name for m in answer.table_metadata] == ["orders"]


def test_servers_apart_join_with_cluster_secret_and_a_wrong_one_cannot(tmp_path: Path) -> None:
    coordinator = ServerProcess(
        {"data.dir": str(tmp_path / "c"), "server.port": 0, "cluster.secret": "s3cret"}, ("coordinator",)
    ).start()
    try:
        def tablet(secret: str) -> ServerProcess:
            conf = {"data.dir": str(tmp_path / f"t-{secret}"), "server.port": 0, "coordinator.address": coordinator.address,
                    "tablet-server.id": 1, "cluster.secret": secret}
            return ServerProcess(conf, ("tablet-server",))

        with pytest.raises(lakelog.AuthorizationError, match="RegisterTabletServer is for the servers of this cluster only"):
            tablet("wrong").start()
        member = tablet("s3cret").start()
        try:
            with lakelog.connect(coordinator.address) as conn:
                table = create_table(conn)
                with table.new_append().create_writer() as writer:
                    writer.append_arrow(order_rows(0, 50))
                assert conn.admin.list_offsets(table.path) == {0: 50}
        finally:
            member.stop(0)
    finally:
        coordinator.stop(0)
