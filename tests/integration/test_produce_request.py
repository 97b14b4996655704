"""The produce path pieces that are pure functions: the hand-serialized ProduceLogRequest and the
server's hand parse of it, the split of Arrow input by partition name and Arrow input already of the table's schema (every
writer test covers them on real servers)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakelog

from lakelog.client.arrow_input import arrow_table
from lakelog.client.bucket_assigner import split_rows
from lakelog.client.rpc.messages import ProduceBucket, ProduceRequest
from lakelog.client.rpc.tablet_gateway import encode_produce_request
from lakelog.errors import SchemaMismatchError
from lakelog.record.batch import iter_headers
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.server.rpc.error_boundary import MalformedRequest
from lakelog.server.rpc.produce_request import BucketRecords, parse_produce_request
from lakelog.server.server_process import ServerProcess
from tests.harness.tables import create_table, order_rows


def test_hand_serialized_request_is_the_protobuf_message() -> None:
    batches = [b"a" * 5, b"b" * 300, b"c" * 70_000]
    produce = ProduceRequest(7, [ProduceBucket(3, batches, 12), ProduceBucket(1, [b"d" * 9], 13)], 30_000, "hold-1")

    parsed = pb.ProduceLogRequest.FromString(encode_produce_request(produce))

    assert (parsed.acks, parsed.table_id, parsed.timeout_ms, parsed.hold_id) == (-1, 7, 30_000, "hold-1")
    assert [(b.partition_id, b.bucket_id, b.records) for b in parsed.buckets_req] == [(12, 3, b"".join(batches)), (13, 1, b"d" * 9)]


def test_the_server_reads_a_request_as_protobuf_does_and_its_records_as_views_of_it() -> None:
    batches = [b"a" * 5, b"c" * 70_000]
    data = encode_produce_request(ProduceRequest(7, [ProduceBucket(3, batches, 12)], 30_000, "hold-1"))
    # Protobuf's own serialization puts the records last and the small fields first; another bucket, unknown field 15.
    other = pb.ProduceLogRequest(buckets_req=[pb.PbProduceLogReqForBucket(bucket_id=5, records=b"z" * 9)]).SerializeToString()
    data += other + bytes([15 << 3 | 0, 1])

    parsed = parse_produce_request(data)

    assert not isinstance(parsed, MalformedRequest), parsed.reason
    assert (parsed.table_id, parsed.hold_id) == (7, "hold-1")
    assert [(b.partition_id, b.bucket_id, bytes(b.records)) for b in parsed.buckets] == [(12, 3, b"".join(batches)), (0, 5, b"z" * 9)]
    assert all(isinstance(b, BucketRecords) and b.records.obj is data for b in parsed.buckets), "records are copied"


@pytest.mark.parametrize(
    "data",
    [b"\x22\x7f\x1a", b"\x22\x03\x1a\x05ab", b"\x12\x80", b"\x2a\x02\xff\xfe", b"\x07"],
    ids=["bucket runs past the end", "records run past their bucket", "varint runs out", "hold id not UTF-8", "wire type 7"],
)
def test_a_request_that_is_not_protobuf_is_named_as_such(data: bytes) -> None:
    parsed = parse_produce_request(data)
    assert isinstance(parsed, MalformedRequest) and parsed.message_name == "ProduceLogRequest"


def test_split_by_string_keys_keeps_each_partitions_rows_in_order() -> None:
    days = ["d2", "d10", "d2", "d1", "d10", "d2"]
    table = pa.table({"n": list(range(len(days))), "day": days})
    keys = pa.chunked_array([days[:4], days[4:]])

    expected = [("d1", [3]), ("d10", [1, 4]), ("d2", [0, 2, 5])]
    for given in (keys, keys.combine_chunks().dictionary_encode()):
        assert [(day, rows.column("n").to_pylist()) for day, rows in split_rows(table, given)] == expected


def test_input_already_of_the_schema_is_taken_as_is_but_still_checked_for_nulls() -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    fits = pa.table({"id": [1, 2], "name": ["a", None]}, schema=schema)
    assert arrow_table(fits, schema, "shop.items") is fits

    holed = pa.table({"id": pa.array([1, None], pa.int64()), "name": ["a", "b"]}, schema=schema)
    with pytest.raises(SchemaMismatchError, match=r"column 'id' holds 1 null value\(s\) but the table requires it"):
        arrow_table(holed, schema, "shop.items")


def test_a_table_a_little_over_the_batch_size_is_one_request_not_a_full_one_and_a_sliver(server: ServerProcess) -> None:
    """What a partitioned writer gathers ends a little past ``client.writer.batch-size``: one
    batch, one request (in sync flush mode, one fsync), not a full batch and a sliver that the
    sticky bucket sends to the next bucket; a larger table goes in batches of equal rows (one
    request may carry several of a bucket's batches: the stored batches tell)."""
    row_bytes = order_rows(0, 1).nbytes  # one row's bytes, as the writer estimates them
    acks: list[lakelog.AppendAck] = []
    with lakelog.connect(server.address, {"client.writer.batch-size": str(1000 * row_bytes)}) as conn:
        with create_table(conn, buckets=2).new_append().create_writer(on_ack=acks.append) as writer:
            writer.append_arrow(order_rows(0, 1))  # the writer learns the row width
            writer.flush()
            writer.append_arrow(order_rows(1, 1040))
            writer.flush()
            writer.append_arrow(order_rows(1041, 2600))
    assert [ack.record_count for ack in acks[:2]] == [1, 1040]
    assert sum(ack.record_count for ack in acks[2:]) == 2600
    stored = [
        header.record_count
        for segment in sorted((server.data_dir / "tablet-server" / "log").glob("*/*/*.log"))
        for _, header in iter_headers(segment.read_bytes())
    ]
    assert sorted(stored) == [1, 866, 867, 867, 1040]
