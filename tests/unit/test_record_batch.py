"""The record batch alone: what encode writes, what validate refuses (each damage named with the
batch and the place it came from), what the server may stamp without breaking the CRC, and that a
body which lies about its records is refused before it is stored."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakelog.errors import CorruptRecordError, InvalidRecordError, RecordFormatError
from lakelog.record import batch as rb
from tests.harness.forged_batches import lie, several_batches_in_one_body

WHERE = "shop.orders bucket 2"


def rows(first: int, count: int) -> pa.RecordBatch:
    return pa.record_batch({"id": pa.array(range(first, first + count), pa.int64()), "name": pa.array([f"n{i}" for i in range(first, first + count)])})


def test_an_encoded_batch_carries_its_counts_and_a_body_padded_to_64_bytes() -> None:
    data = rb.encode_batch(rows(0, 7), schema_id=3, commit_timestamp=1234, writer=(9, 2, 40))
    header = rb.validate(data, 0, WHERE)
    assert (header.magic, header.schema_id, header.record_count, header.commit_timestamp) == (rb.MAGIC, 3, 7, 1234)
    assert (header.writer_id, header.writer_epoch, header.batch_sequence) == (9, 2, 40)
    assert header.size == len(data) and len(data) % rb.ALIGNMENT == 0
    assert 0 <= header.size - rb.HEADER_SIZE - header.body_length < rb.ALIGNMENT
    assert (header.last_offset, header.next_offset) == (6, 7)


def test_the_body_decodes_to_the_batch_that_was_encoded() -> None:
    data = rb.encode_batch(rows(5, 100), schema_id=1)
    assert rb.decode_body(data, 0, rb.read_header(data)).equals(rows(5, 100))
    assert rb.decode_schema(data, 0, rb.read_header(data)).equals(rows(0, 1).schema)


def test_the_server_stamps_offset_and_time_in_place_and_the_crc_still_holds() -> None:
    stamped = bytearray(rb.encode_batch(rows(0, 3), schema_id=1))
    rb.stamp(stamped, 0, base_offset=500, commit_timestamp=1_700_000_000_000)
    header = rb.validate(stamped, 0, WHERE)
    assert (header.base_offset, header.commit_timestamp) == (500, 1_700_000_000_000)


def test_a_restamped_batch_carries_its_new_writer_fields_under_a_valid_crc_and_the_original_is_untouched() -> None:
    original = rb.encode_batch(rows(0, 3), schema_id=1, writer=(9, 0, 4))
    again = rb.restamp_writer(original, 9, 1, 0)
    header = rb.validate(again, 0, WHERE)
    assert (header.writer_id, header.writer_epoch, header.batch_sequence) == (9, 1, 0)
    assert rb.read_header(original).writer_epoch == 0


def test_a_flipped_byte_is_a_crc_mismatch_naming_the_batch_and_the_place() -> None:
    data = bytearray(rb.encode_batch(rows(0, 3), schema_id=1, base_offset=40))
    data[rb.HEADER_SIZE + 10] ^= 0xFF
    with pytest.raises(CorruptRecordError, match=r"shop.orders bucket 2: CRC mismatch in batch at offset 40: stored 0x[0-9a-f]{8}, computed"):
        rb.validate(data, 0, WHERE)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[:20], "truncated batch header"),
        (lambda data: lie(data, magic=7), "bad magic 7"),
        (lambda data: lie(data, length=len(data) * 2), "past the end"),
        (lambda data: lie(data, body_length=1), "not a body padded to a multiple of 64 bytes"),
        (lambda data: lie(data, record_count=0), "has record count 0"),
    ],
    ids=["truncated", "magic", "length", "body length", "no records"],
)
def test_a_damaged_header_is_refused_naming_what_is_wrong(damage, message: str) -> None:  # noqa: ANN001
    data = rb.encode_batch(rows(0, 3), schema_id=1)
    with pytest.raises(CorruptRecordError, match=message):
        rb.validate(damage(data), 0, WHERE)


def test_a_batch_of_the_older_format_is_refused_as_such_and_not_as_damage() -> None:
    old = lie(rb.encode_batch(rows(0, 3), schema_id=1, base_offset=12), magic=1)
    with pytest.raises(RecordFormatError, match="batch at offset 12 is in record format version 1; this lakelog reads format version 2 only"):
        rb.validate(old, 0, WHERE)


def test_walking_a_buffer_yields_whole_batches_and_stops_before_a_partial_one() -> None:
    first, second = rb.encode_batch(rows(0, 3), 1, base_offset=0), rb.encode_batch(rows(3, 4), 1, base_offset=3)
    buffer = first + second + second[:100]
    walked = [(pos, header.base_offset, header.record_count) for pos, header in rb.iter_headers(buffer)]
    assert walked == [(0, 0, 3), (len(first), 3, 4)]
    assert [pos for pos, _ in rb.iter_headers(buffer, len(first))] == [len(first)]


def test_a_header_that_lies_about_its_record_count_is_refused_before_it_is_stored() -> None:
    data = lie(rb.encode_batch(rows(0, 5), schema_id=1), record_count=50)
    header = rb.read_header(data)
    with pytest.raises(InvalidRecordError, match="says it holds 50 records, its Arrow body holds 5"):
        rb.check_body(data, 0, header, rows(0, 1).schema, WHERE)


def test_a_body_holding_two_arrow_batches_is_refused() -> None:
    data = several_batches_in_one_body([rows(0, 2), rows(2, 3)])
    with pytest.raises(InvalidRecordError, match="more than one Arrow record batch"):
        rb.check_body(data, 0, rb.read_header(data), rows(0, 1).schema, WHERE)


def test_a_body_whose_values_are_invalid_is_refused() -> None:
    data = bytearray(rb.encode_batch(pa.record_batch({"name": pa.array(["abc", "def"])}), schema_id=1))
    at = bytes(data).rindex(b"abcdef")
    data[at : at + 2] = b"\xff\xfe"  # not UTF-8 any more
    with pytest.raises(InvalidRecordError, match="does not decode"):
        rb.check_body(bytes(data), 0, rb.read_header(data), pa.schema([("name", pa.string())]), WHERE)


def test_equal_schemas_have_equal_schema_messages_and_others_do_not() -> None:
    one, two = rb.encode_batch(rows(0, 3), 1), rb.encode_batch(rows(9, 1), 1)
    other = rb.encode_batch(pa.record_batch({"id": pa.array([1], pa.int32())}), 1)
    message = rb.schema_message(one, 0, rb.read_header(one))
    assert message is not None and message == rb.schema_message(two, 0, rb.read_header(two))
    assert message != rb.schema_message(other, 0, rb.read_header(other))


def test_one_decoder_reuses_a_parsed_schema_and_still_decodes_a_batch_of_another() -> None:
    decoder = rb.BodyDecoder()
    a, b = rb.encode_batch(rows(0, 3), 1), rb.encode_batch(rows(3, 2), 1)
    c = rb.encode_batch(pa.record_batch({"price": pa.array([0.5, 1.5])}), 1)
    assert decoder.decode(a, 0, rb.read_header(a)).equals(rows(0, 3))
    assert decoder.decode(b, 0, rb.read_header(b)).equals(rows(3, 2))
    assert decoder.decode(c, 0, rb.read_header(c)).column("price").to_pylist() == [0.5, 1.5]


def test_dictionary_encoded_batches_round_trip() -> None:
    data = pa.record_batch({"tag": pa.array(["a", "b", "a"]).dictionary_encode()})
    encoded = rb.encode_batch(data, schema_id=1)
    decoded = rb.decode_body(encoded, 0, rb.validate(encoded, 0, WHERE))
    assert decoded.column("tag").to_pylist() == ["a", "b", "a"]


def test_batch_in_misaligned_memory_decodes_to_aligned_arrays() -> None:
    """Records handed over at an odd address (a view into a larger message) still give aligned
    arrays: the body is copied, with a warning, since that costs a copy per batch."""
    data = pa.record_batch({"id": pa.array(range(1000), pa.int64()), "price": pa.array([0.5] * 1000)})
    records = rb.encode_batch(data, schema_id=1)
    misaligned = memoryview(b"x" + records)[1:]

    with pytest.warns(RuntimeWarning, match="not aligned"):
        decoded = rb.decode_body(misaligned, 0, rb.read_header(misaligned))

    assert decoded.equals(data)
    assert all(buf.address % 8 == 0 for column in decoded.columns for buf in column.buffers() if buf is not None)
