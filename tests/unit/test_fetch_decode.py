"""Decoding a fetch answer on the client: exact records and meta columns, the received bytes used in
place (no copy of the records), and a batch of another schema refused even where the decoder
reuses a parsed schema.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakelog.client.scanner.batch_decoder import decode_records, offsets_array
from lakelog.record.meta_columns import with_meta_fields
from lakelog.errors import SchemaMismatchError
from lakelog.record.batch import encode_batch

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
OUT = with_meta_fields(SCHEMA)


def rows(first: int, count: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array(range(first, first + count), pa.int64()), pa.array([f"n{i}" for i in range(first, first + count)])], schema=SCHEMA)


def answer(*batches: tuple[pa.RecordBatch, int, int]) -> bytes:
    """Stamped batches ``(data, base offset, commit timestamp)`` back to back, as a server sends them."""
    return b"".join(encode_batch(data, 1, base_offset=base, commit_timestamp=ts) for data, base, ts in batches)


def test_records_and_meta_columns_from_the_fetch_offset_on() -> None:
    records = answer((rows(0, 5), 100, 7000), (rows(5, 3), 105, 7000), (rows(8, 4), 108, 7005))

    table, _ = decode_records(records, 3, 102, OUT, "test bucket 3")

    assert table.schema == OUT
    assert table.column("id").to_pylist() == list(range(2, 12))
    assert table.column("__offset").to_pylist() == list(range(102, 112))
    assert table.column("__bucket").to_pylist() == [3] * 10
    assert table.column("__timestamp").to_pylist() == [7000] * 6 + [7005] * 4


def test_records_are_decoded_in_place_of_the_received_bytes() -> None:
    records = answer((rows(0, 1000), 0, 1), (rows(1000, 1000), 1000, 2))
    start = pa.py_buffer(records).address

    table, _ = decode_records(records, 0, 0, OUT, "test bucket 0")

    for name in SCHEMA.names:
        for chunk in table.column(name).chunks:
            for buf in chunk.buffers():
                if buf is not None:
                    assert start <= buf.address < start + len(records), f"{name} was copied"
                    assert buf.address % 8 == 0, f"{name} is misaligned"


def test_a_batch_of_another_schema_is_refused_after_one_of_the_right_schema() -> None:
    other = pa.record_batch([pa.array([1.5]), pa.array(["x"])], names=["id", "name"])
    records = answer((rows(0, 2), 0, 1), (other, 2, 1))

    with pytest.raises(SchemaMismatchError, match="batch at offset 2"):
        decode_records(records, 0, 0, OUT, "test bucket 0")


def test_dictionary_encoded_batches_decode_like_any_other() -> None:
    schema = pa.schema([pa.field("tag", pa.dictionary(pa.int32(), pa.string()))])
    data = pa.record_batch([pa.array(["a", "b", "a"]).dictionary_encode()], schema=schema)
    records = answer((data, 0, 1), (data, 3, 1))

    table, _ = decode_records(records, 0, 0, with_meta_fields(schema), "test bucket 0")

    assert table.column("tag").to_pylist() == ["a", "b", "a"] * 2
    assert table.column("__offset").to_pylist() == list(range(6))


def test_offset_ramps_of_any_start_and_length_as_the_cached_ramp_grows() -> None:
    for start, count in ((0, 3), (41, 1), (7, 1000), (0, 0), (2**40, 5), (5, 3000)):
        assert offsets_array(start, count).to_pylist() == list(range(start, start + count))
