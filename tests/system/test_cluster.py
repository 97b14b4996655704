"""A coordinator and two tablet servers apart; server reflection lists every method."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

import lakelog
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.server.server_process import ServerProcess
from tests.harness.membership import SECRET
from tests.harness.tables import create_table, order_rows, scan_all


@pytest.fixture
def cluster(tmp_path: Path):
    coordinator = ServerProcess({"data.dir": str(tmp_path / "c"), "server.port": 0, **SECRET}, ("coordinator",)).start()
    tablets = [
        ServerProcess(
            {
                "data.dir": str(tmp_path / f"t{i}"),
                "server.port": 0,
                "coordinator.address": coordinator.address,
                "tablet-server.id": i,
                **SECRET,
            },
            ("tablet-server",),
        ).start()
        for i in (1, 2)
    ]
    yield coordinator, tablets
    for process in [*tablets, coordinator]:
        process.stop(0)


def test_two_tablet_servers_serve_buckets_led_by_both(cluster) -> None:
    coordinator, tablets = cluster
    with lakelog.connect(coordinator.address) as conn:
        table = create_table(conn, buckets=4)
        leaders = {info.leader for info in conn.admin.describe_buckets(table.path).values()}
        assert leaders == {1, 2}
        writer = table.new_append().create_writer()
        for start in range(0, 4000, 500):
            writer.append_arrow(order_rows(start, 500))
        writer.flush()
        scanner = table.new_scan().create_log_scanner()
        scanner.subscribe_from_beginning()
        log = scan_all(scanner, 4000)
        assert sorted(log.column("id").to_pylist()) == list(range(4000))
        assert set(log.column("__bucket").to_pylist()) == {0, 1, 2, 3}
        for tablet in tablets:
            assert any(tablet.data_dir.glob("tablet-server/log/*/*/*.log"))


def test_tablet_server_restart_keeps_its_buckets(cluster, tmp_path: Path) -> None:
    coordinator, tablets = cluster
    with lakelog.connect(coordinator.address) as conn:
        table = create_table(conn, buckets=2)
        writer = table.new_append().create_writer()
        writer.append_arrow(order_rows(0, 1000))
        writer.flush()
        tablets[0].stop(0)
        restarted = ServerProcess(
            {"data.dir": str(tmp_path / "t1"), "server.port": 0, "coordinator.address": coordinator.address, **SECRET},
            ("tablet-server",),
        ).start()
        tablets[0] = restarted
        assert restarted.tablet is not None and restarted.tablet.server_id == 1
        scanner = table.new_scan().create_log_scanner()
        scanner.subscribe_from_beginning()
        assert scan_all(scanner, 1000).num_rows == 1000


def test_reflection_lists_both_services_and_every_method(server) -> None:
    """What grpcurl does: discover services, methods and message types by reflection, then call one."""
    with grpc.insecure_channel(server.address) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        assert {"lakelog.rpc.CoordinatorService", "lakelog.rpc.TabletService"} <= set(database.get_services())
        pool = DescriptorPool(database)
        for name in ("CoordinatorService", "TabletService"):
            expected = {m.name for m in pb.DESCRIPTOR.services_by_name[name].methods}
            listed = {m.name for m in pool.FindServiceByName(f"lakelog.rpc.{name}").methods}
            assert listed == expected and len(listed) >= 6

        method = pool.FindServiceByName("lakelog.rpc.CoordinatorService").methods_by_name["CreateDatabase"]
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        call = channel.unary_unary(
            "/lakelog.rpc.CoordinatorService/CreateDatabase",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_class.FromString,
        )
        call(request_class(database_name="from_reflection"))
    with lakelog.connect(server.address) as conn:
        assert "from_reflection" in conn.admin.list_databases()
