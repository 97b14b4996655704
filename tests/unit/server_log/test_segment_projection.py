"""Projected reads of a segment: only the kept columns' bytes are read, the result is what decoding,
selecting and re-encoding would give, and ``max_bytes`` counts projected bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from lakelog.errors import CorruptRecordError
from lakelog.record import batch as rb
from lakelog.record.ipc_message import read_record_batch_message, write_record_batch_message
from lakelog.record.projection import BatchProjection
from lakelog.server.log.segment import LogSegment

ROWS = 300
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("tags", pa.list_(pa.int32())),
        ("point", pa.struct([("x", pa.float64()), ("label", pa.large_string())])),
        ("attrs", pa.map_(pa.string(), pa.int64())),
        ("flag", pa.bool_()),
        ("nothing", pa.null()),
        ("at", pa.timestamp("ms")),
        ("pair", pa.list_(pa.int16(), 2)),
    ]
)


def rows(first: int, count: int) -> pa.RecordBatch:
    ids = range(first, first + count)
    return pa.record_batch(
        [
            pa.array([i if i % 7 else None for i in ids], pa.int64()),
            pa.array([f"name-{i}" if i % 5 else None for i in ids]),
            pa.array([[i, i + 1] if i % 3 else None for i in ids], pa.list_(pa.int32())),
            pa.array([{"x": i * 0.5, "label": str(i)} if i % 4 else None for i in ids], SCHEMA.field("point").type),
            pa.array([[("k", i), ("j", -i)] for i in ids], SCHEMA.field("attrs").type),
            pa.array([i % 2 == 0 for i in ids]),
            pa.nulls(count),
            pa.array(list(ids), pa.timestamp("ms")),
            pa.array([[i, -i] for i in ids], SCHEMA.field("pair").type),
        ],
        schema=SCHEMA,
    )


def fill(segment: LogSegment, batches: list[pa.RecordBatch]) -> None:
    offset = segment.next_offset
    for number, data in enumerate(batches):
        segment.append(rb.encode_batch(data, 1, base_offset=offset, commit_timestamp=1000 + number))
        offset += data.num_rows


def decoded(records: bytes | bytearray) -> list[tuple[rb.BatchHeader, pa.RecordBatch]]:
    out = []
    for pos, header in rb.iter_headers(records):
        rb.validate(records, pos, "projected answer")
        out.append((header, rb.decode_body(records, pos, header)))
    return out


@pytest.fixture
def segment(tmp_path: Path) -> LogSegment:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=4096)
    fill(segment, [rows(i * ROWS, ROWS + i) for i in range(4)])  # sizes differ: each batch plans anew
    return segment


@pytest.mark.parametrize("fields", [[0], [1], [2], [3], [4], [5], [6], [7], [8], [7, 0], [4, 1, 3], list(range(9))])
def test_a_projected_read_equals_decoding_selecting_and_encoding(segment: LogSegment, fields: list[int]) -> None:
    got = decoded(segment.read_projected(0, 1 << 30, segment.size, 0, BatchProjection(fields)))
    assert len(got) == 4
    first = 0
    for number, (header, data) in enumerate(got):
        expected = rows(number * ROWS, ROWS + number).select(fields)
        assert (header.base_offset, header.commit_timestamp, header.record_count) == (first, 1000 + number, len(expected))
        assert header.attributes & rb.ATTR_PROJECTED
        data.validate(full=True)
        assert data.equals(expected)
        assert data.schema.names == expected.schema.names
        first += len(expected)


def test_only_the_kept_columns_are_read_from_the_file(segment: LogSegment, monkeypatch: pytest.MonkeyPatch) -> None:
    segment.read(0, 1 << 30, segment.size)  # checked once: a read after trusts the CRCs it verified
    read = []
    real_pread, real_preadv = os.pread, os.preadv
    monkeypatch.setattr(os, "pread", lambda fd, n, at: read.append(n) or real_pread(fd, n, at))
    monkeypatch.setattr(os, "preadv", lambda fd, views, at: read.append(sum(map(len, views))) or real_preadv(fd, views, at))
    out = segment.read_projected(0, 1 << 30, segment.size, 0, BatchProjection([5]))  # booleans: a bit a row
    assert len(decoded(out)) == 4
    assert sum(read) < segment.size / 4


def test_max_bytes_counts_projected_bytes_and_one_batch_always_comes(segment: LogSegment) -> None:
    projection = BatchProjection([0])
    whole = segment.read_projected(0, 1 << 30, segment.size, 0, projection)
    sizes = [header.size for _, header in rb.iter_headers(whole)]
    two = segment.read_projected(0, sizes[0] + sizes[1], segment.size, 0, projection)
    assert [header.size for _, header in rb.iter_headers(two)] == sizes[:2]
    assert len(decoded(segment.read_projected(0, 1, segment.size, 0, projection))) == 1
    stored_two = segment.read(0, sizes[0] + sizes[1], segment.size)
    assert len(list(rb.iter_headers(stored_two))) < 2  # the stored batches are far bigger


def test_a_layout_it_does_not_move_as_bytes_is_decoded_instead(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=4096)
    words = pa.array(["a", "b", "a", "c"]).dictionary_encode()
    data = pa.record_batch({"id": pa.array([1, 2, 3, 4], pa.int64()), "word": words})
    fill(segment, [data, data])
    [(header, first), (_, second)] = decoded(segment.read_projected(0, 1 << 30, segment.size, 0, BatchProjection([1, 0])))
    assert first.equals(data.select([1, 0])) and second.equals(data.select([1, 0]))
    assert header.base_offset == 0


def test_a_batch_not_checked_yet_is_read_whole_and_its_damage_named(tmp_path: Path, segment: LogSegment) -> None:
    second = list(rb.iter_headers(segment.read(0, 1 << 30, segment.size)))[1][0]
    with open(segment.path, "r+b") as raw:
        raw.seek(second + rb.HEADER_SIZE + 200)
        byte = raw.read(1)
        raw.seek(-1, os.SEEK_CUR)
        raw.write(bytes([byte[0] ^ 0xFF]))
    reopened = LogSegment(tmp_path, 0, index_interval_bytes=4096)
    reopened.sanity_check()
    with pytest.raises(CorruptRecordError, match=rf"{reopened.path} at byte {second}: CRC mismatch"):
        reopened.read_projected(0, 1 << 30, reopened.size, 0, BatchProjection([0]))


def test_a_record_batch_message_written_by_hand_reads_back_in_arrow() -> None:
    data = pa.record_batch({"a": pa.array([1, None, 3], pa.int64()), "b": pa.array(["x", "yy", None])})
    message = read_record_batch_message(data.serialize().to_pybytes())
    assert (message.length, message.plain) == (3, True)
    assert message.nodes == [(3, 1), (3, 1)]
    body = data.serialize().slice(len(data.serialize()) - message.body_length)
    again = write_record_batch_message(message.length, message.nodes, message.buffers, message.body_length)
    rebuilt = pa.ipc.read_record_batch(pa.py_buffer(again + body.to_pybytes()), data.schema)
    assert rebuilt.equals(data)


def test_a_message_that_is_not_a_record_batch_is_refused_by_name() -> None:
    with pytest.raises(CorruptRecordError, match="not a record batch"):
        read_record_batch_message(pa.schema([("a", pa.int64())]).serialize().to_pybytes())
    with pytest.raises(CorruptRecordError, match="not one this format writes"):
        read_record_batch_message(b"\x00" * 16)
