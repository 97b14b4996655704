"""No client can drop, duplicate or poison another's records: the red team's probes, sent as a
hostile or buggy client sends them (raw ProduceLog requests), against a real server on loopback.

- A batch under another writer's id is refused: writer ids are proven by the token the coordinator
  issued with them, bound to the caller's principal when authentication is on.
- A resend is answered as a duplicate only when it is the same batch; writer state is kept by age,
  so a flood of new writers cannot make a bucket forget one.
- A batch whose body disagrees with its header is refused, naming what disagrees; the bucket takes
  the next good batch and every reader reads on. A bad batch a reader meets anyway is a
  CorruptRecordError, not a hang.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

import lakelog
from lakelog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    UnknownWriterError,
    WriterSequenceConflictError,
)
from lakelog.record import batch as rb
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.server.log.log_tablet import LogConfig, LogTablet
from lakelog.server.server_process import ServerProcess
from tests.harness.forged_batches import lie, several_batches_in_one_body
from tests.harness.raw_client import RawClient
from tests.harness.tables import create_table, order_rows, scan_all


def batch(first: int, rows: int, writer: tuple[int, int, int] = (rb.NO_WRITER, 0, 0)) -> bytes:
    return rb.encode_batch(order_rows(first, rows), 1, writer=writer)


def ids_in(table: lakelog.Table, expected: int) -> list[int]:
    scanner = table.new_scan().create_log_scanner()
    scanner.subscribe_from_beginning()
    return scan_all(scanner, expected).column("id").to_pylist()


def refusal(answer: pb.PbProduceLogRespForBucket) -> tuple[int, str]:
    return answer.error_code, answer.error_message


@pytest.fixture
def raw(server: ServerProcess) -> Any:
    client = RawClient(server.address)
    yield client
    client.close()


def test_a_batch_under_another_writers_id_is_refused_and_that_writers_own_batch_is_appended(
    conn: lakelog.Connection, raw: RawClient
) -> None:
    table = create_table(conn)
    table_id = table.info.table_id
    victim, forger = raw.init_writer(), raw.init_writer()
    assert raw.produce(table_id, [batch(0, 3, (victim.writer_id, 0, 0))], victim.token).error_code == 0
    # The forger sends the victim's id, epoch and next sequence: with its own token, or none.
    for token in (forger.token, b""):
        code, message = refusal(raw.produce(table_id, [batch(100, 3, (victim.writer_id, 0, 1))], token))
        assert code == UnknownWriterError.code
        assert f"writer id {victim.writer_id} was not issued to this caller" in message
    real = raw.produce(table_id, [batch(3, 3, (victim.writer_id, 0, 1))], victim.token)
    assert (real.error_code, real.base_offset) == (0, 3)  # appended, not answered as a duplicate
    assert ids_in(table, 6) == list(range(6))


@pytest.mark.parametrize("writer_id", [987654321, -5])
def test_a_writer_id_the_coordinator_never_issued_is_refused(conn: lakelog.Connection, raw: RawClient, writer_id: int) -> None:
    table = create_table(conn)
    code, message = refusal(raw.produce(table.info.table_id, [batch(0, 1, (writer_id, 0, 0))], b"\x00" * 16))
    assert code == UnknownWriterError.code and f"writer id {writer_id}" in message
    assert conn.admin.list_offsets(table.path, spec=lakelog.OffsetSpec.latest()) == {0: 0}


def test_with_authentication_an_id_and_token_issued_to_another_principal_are_refused(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    tokens = {"alice": "alice-secret-token", "mallory": "mallory-secret-token", "servers": "servers-secret-token"}
    actions = {"alice": ["read", "write", "admin"], "mallory": ["read", "write"], "servers": ["internal"]}
    tokens_file = tmp_path / "tokens.yaml"
    tokens_file.write_text(
        yaml.safe_dump({name: {"sha256": hashlib.sha256(token.encode()).hexdigest(), "actions": actions[name]} for name, token in tokens.items()})
    )
    server = server_factory(
        **{"security.auth.enabled": "true", "security.auth.tokens-file": str(tokens_file), "security.auth.token": tokens["servers"]}
    )
    alice = RawClient(server.address, (("authorization", f"Bearer {tokens['alice']}"),))
    mallory = RawClient(server.address, (("authorization", f"Bearer {tokens['mallory']}"),))
    try:
        with lakelog.connect(server.address, config={"security.auth.token": tokens["alice"]}) as conn:
            table = create_table(conn)
            identity = alice.init_writer()
            assert alice.produce(table.info.table_id, [batch(0, 2, (identity.writer_id, 0, 0))], identity.token).error_code == 0
            # Mallory copied alice's writer id and token (her traffic): they are alice's, not hers.
            code, message = refusal(mallory.produce(table.info.table_id, [batch(50, 2, (identity.writer_id, 0, 1))], identity.token))
            assert code == UnknownWriterError.code and "not issued to principal 'mallory'" in message
            assert alice.produce(table.info.table_id, [batch(2, 2, (identity.writer_id, 0, 1))], identity.token).base_offset == 2
            assert ids_in(table, 4) == [0, 1, 2, 3]
    finally:
        alice.close()
        mallory.close()


def test_a_resend_is_a_duplicate_only_when_it_is_the_same_batch(conn: lakelog.Connection, raw: RawClient) -> None:
    table = create_table(conn)
    writer = raw.init_writer()
    original = batch(0, 3, (writer.writer_id, 0, 0))
    assert raw.produce(table.info.table_id, [original], writer.token).error_code == 0
    resent = raw.produce(table.info.table_id, [original], writer.token)
    assert (resent.error_code, resent.base_offset, resent.high_watermark) == (0, 0, 3)
    code, message = refusal(raw.produce(table.info.table_id, [batch(7, 3, (writer.writer_id, 0, 0))], writer.token))
    assert code == WriterSequenceConflictError.code
    assert f"writer {writer.writer_id} epoch 0 sequence 0 was appended at offsets [0, 3)" in message
    assert ids_in(table, 3) == [0, 1, 2]


def test_a_flood_of_new_writers_does_not_make_a_bucket_forget_a_writer(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory(**{"log.flush.mode": "async"})  # 10,002 appends, one fsync each in sync mode
    raw = RawClient(server.address)
    try:
        with lakelog.connect(server.address) as conn:
            table = create_table(conn)
            table_id = table.info.table_id
            victim = raw.init_writer()
            acknowledged = batch(0, 1, (victim.writer_id, 0, 0))
            assert raw.produce(table_id, [acknowledged], victim.token).error_code == 0
            flood = [raw.init_writer() for _ in range(10_001)]
            for start in range(0, len(flood), 1000):
                entries = [(batch(1, 1, (w.writer_id, 0, 0)), w.token) for w in flood[start : start + 1000]]
                assert all(answer.error_code == 0 for answer in raw.produce_many(table_id, entries))
            resent = raw.produce(table_id, [acknowledged], victim.token)
            assert (resent.error_code, resent.base_offset) == (0, 0)
            assert conn.admin.list_offsets(table.path, spec=lakelog.OffsetSpec.latest()) == {0: 10_002}
    finally:
        raw.close()


LIES: dict[str, tuple[Callable[[], bytes], str]] = {
    "count 1 for 10 rows": (lambda: lie(batch(100, 10), record_count=1), "says it holds 1 records, its Arrow body holds 10"),
    "count 100 for 10 rows": (lambda: lie(batch(100, 10), record_count=100), "says it holds 100 records, its Arrow body holds 10"),
    "two record batches": (lambda: several_batches_in_one_body([order_rows(100, 5), order_rows(105, 5)]), "holds more than one Arrow record batch"),
    "attributes set": (lambda: lie(batch(100, 10), attributes=1), "attributes 0x1"),
}


@pytest.mark.parametrize("lie_name", LIES)
def test_a_batch_whose_body_disagrees_with_its_header_is_refused_and_the_bucket_goes_on(
    conn: lakelog.Connection, raw: RawClient, lie_name: str
) -> None:
    make, reason = LIES[lie_name]
    table = create_table(conn)
    assert raw.produce(table.info.table_id, [batch(0, 5)]).error_code == 0
    code, message = refusal(raw.produce(table.info.table_id, [make()]))
    assert code == InvalidRecordError.code
    assert message.startswith("produce to shop.orders bucket 0: batch at byte 0") and reason in message
    assert raw.produce(table.info.table_id, [batch(5, 5)]).base_offset == 5
    assert ids_in(table, 10) == list(range(10))


@pytest.mark.parametrize("record_count", [1, 100])
def test_a_lying_batch_already_in_a_log_is_a_corrupt_record_error_for_the_reader_not_a_hang(
    server_factory: Callable[..., ServerProcess], tmp_path: Path, record_count: int
) -> None:
    """Written past the server's checks (straight into the bucket's files, as an older server or a
    damaged disk could have), the batch fails the poll that reaches it by name."""
    server = server_factory()
    with lakelog.connect(server.address) as conn:
        table = create_table(conn)
    assert server.tablet is not None
    directory = server.tablet.logs.get(table.info.table_id, 0).directory
    server.stop(0)
    log = LogTablet.open(directory, LogConfig(), 0, "shop.orders bucket 0")
    log.append(batch(0, 5))
    log.append(lie(batch(5, 10), record_count=record_count))
    log.close()
    again = server_factory(tmp_path / "data")
    with lakelog.connect(again.address) as conn:
        scanner = conn.get_table(table.path).new_scan().create_log_scanner()
        scanner.subscribe(0, 5)
        outcome: list[BaseException | int] = []

        def poll() -> None:
            try:
                outcome.append(scanner.poll_arrow(timeout_ms=500).num_rows)
            except BaseException as error:  # noqa: BLE001 - the assertion below names it
                outcome.append(error)

        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        thread.join(60)
        assert outcome, "poll never returned"
        assert isinstance(outcome[0], CorruptRecordError)
        assert f"says it holds {record_count} records, its Arrow body holds 10" in str(outcome[0])
