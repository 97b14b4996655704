"""Which bucket a row goes to.

With bucket keys (``TableDescriptor(bucket_keys=[...])``) a row's bucket is a stable hash of its key
values, the same in every client and process, so one key's rows stay in one bucket (in order):

1. each key value is encoded canonically (:func:`canonical_bytes`): strings as UTF-8, binary as is,
   booleans as one byte, integers (and dates, times, timestamps, durations: their integer value) as
   8 bytes little-endian two's complement; a null hashes to 0;
2. each encoding is hashed with MurmurHash3 x86 32-bit, seed 0 (:func:`murmur3_32`);
3. the column hashes fold in key order: ``h = (h * 31 + column_hash) mod 2**32`` from ``h = 0``;
4. the bucket is ``h mod buckets``.

Without bucket keys the writer sticks to one bucket until a batch of it is sealed, then moves to the
next; every writer starts at a random bucket, so many short-lived writers spread over all buckets.

Arrow input is hashed per distinct value of each key column (``dictionary_encode``), not per row,
then folded with Arrow compute: a batch of 100,000 rows with 1,000 keys costs 1,000 Python hashes.
"""

from __future__ import annotations

import random
import struct
from typing import Any, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import SchemaMismatchError
from lakelog.metadata import TableInfo
from lakelog.client.scanner.batch_decoder import constant_array

_MASK = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit (Austin Appleby's reference), as an unsigned int."""
    h = seed & _MASK
    length = len(data)
    body = length - length % 4
    for (k,) in struct.iter_unpack("<I", data[:body]):
        k = (k * _C1) & _MASK
        k = ((k << 15) | (k >> 17)) & _MASK
        h ^= (k * _C2) & _MASK
        h = ((h << 13) | (h >> 19)) & _MASK
        h = (h * 5 + 0xE6546B64) & _MASK
    tail = data[body:]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * _C1) & _MASK
        k = ((k << 15) | (k >> 17)) & _MASK
        h ^= (k * _C2) & _MASK
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    return h ^ (h >> 16)


def canonical_bytes(value: Any) -> bytes:
    """A key value's encoding for the hash (see the module docstring)."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, bool):
        return b"\x01" if value else b"\x00"
    if isinstance(value, int):
        return (value & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")
    raise TypeError(f"a bucket key value must be a string, bytes, boolean, integer or temporal value, not {type(value).__name__}")


def value_hash(value: Any) -> int:
    return 0 if value is None else murmur3_32(canonical_bytes(value))


def fold_hashes(hashes: Sequence[int]) -> int:
    h = 0
    for column_hash in hashes:
        h = (h * 31 + column_hash) & _MASK
    return h


class BucketAssigner:
    """A writer's bucket choice for a table of ``buckets`` buckets, keyed by ``key_fields`` (empty:
    sticky buckets)."""

    @classmethod
    def for_table(cls, info: TableInfo) -> "BucketAssigner":
        return cls(info.buckets, [info.schema.field(key) for key in info.bucket_keys], str(info.path))

    def __init__(self, buckets: int, key_fields: Sequence[pa.Field], label: str) -> None:
        self._buckets = buckets
        self._keys = list(key_fields)
        self._label = label
        self._current = random.randrange(buckets)

    @property
    def keyed(self) -> bool:
        return bool(self._keys)

    @property
    def key_names(self) -> list[str]:
        return [field.name for field in self._keys]

    @property
    def current(self) -> int:
        """The sticky bucket (tables without bucket keys)."""
        return self._current

    def sealed(self, bucket: int) -> None:
        """A batch of ``bucket`` was sealed: a sticky writer moves on to the next bucket."""
        if bucket == self._current:
            self._current = (self._current + 1) % self._buckets

    def row_bucket(self, row: Mapping[str, Any]) -> int:
        """The bucket of one row of a keyed table."""
        try:
            hashes = [value_hash(_scalar_value(row.get(field.name), field)) for field in self._keys]
        except (TypeError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise SchemaMismatchError(f"{self._label}: bucket key of row {dict(row)!r}: {exc}") from None
        return fold_hashes(hashes) % self._buckets

    def arrow_buckets(self, table: pa.Table) -> pa.Array:
        """The bucket (uint32) of every row of ``table``, a table of the table's schema."""
        folded = constant_array(0, table.num_rows, pa.uint64())
        for field in self._keys:
            column = table.column(field.name).combine_chunks()
            encoded = column.dictionary_encode() if column.type != pa.null() else column
            values = encoded.dictionary.to_pylist() if isinstance(encoded, pa.DictionaryArray) else []
            hashes = pa.array([value_hash(value) for value in _integers_if_temporal(values, field)], pa.uint64())
            per_row = pc.fill_null(pc.take(hashes, encoded.indices), 0)
            folded = pc.bit_wise_and(pc.add(pc.multiply(folded, 31), per_row), _MASK)
        buckets = pc.subtract(folded, pc.multiply(pc.divide(folded, self._buckets), self._buckets))
        return buckets.cast(pa.uint32())

    def split(self, table: pa.Table) -> list[tuple[int, pa.Table]]:
        """``table``'s rows grouped by bucket, each group in the order given."""
        return split_rows(table, self.arrow_buckets(table))


def split_rows(table: pa.Table, keys: pa.Array | pa.ChunkedArray) -> list[tuple[Any, pa.Table]]:
    """``table``'s rows grouped by ``keys`` (one per row, none null), in key order, each group in
    the order given: one stable sort and one take, however many groups there are. Keys that are not
    integers (partition names, dictionary-encoded already or not) are sorted by their dictionary
    codes: sorting the strings themselves is several times slower. The groups are the runs of the
    sorted keys, half the time of counting each key's rows by hashing them."""
    values: list[Any] | None = None
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if not pa.types.is_integer(keys.type):
        encoded = keys.dictionary_encode()
        values, keys = encoded.dictionary.to_pylist(), encoded.indices
    order = pc.sort_indices(keys)
    # The order indexes the table's own rows: checking it again for every column would cost a
    # quarter of the take.
    ordered = pc.take(table, order, boundscheck=False)
    runs = pc.run_end_encode(pc.take(keys, order, boundscheck=False))
    pieces: list[tuple[Any, pa.Table]] = []
    start = 0
    for key, end in zip(runs.values.to_pylist(), runs.run_ends.to_pylist()):
        pieces.append((key if values is None else values[key], ordered.slice(start, end - start)))
        start = end
    return pieces if values is None else sorted(pieces, key=lambda piece: piece[0])


def _scalar_value(value: Any, field: pa.Field) -> Any:
    """A row's key value as the Arrow column would hold it, so rows and Arrow input hash alike."""
    if value is None:
        return None
    scalar = pa.scalar(value, field.type)
    if pa.types.is_temporal(field.type):
        return scalar.cast(_integer_type(field.type)).as_py()
    return scalar.as_py()


def _integer_type(data_type: pa.DataType) -> pa.DataType:
    return pa.int32() if data_type.bit_width == 32 else pa.int64()


def _integers_if_temporal(values: list[Any], field: pa.Field) -> list[Any]:
    if not pa.types.is_temporal(field.type):
        return values
    return pa.array(values, field.type).cast(_integer_type(field.type)).to_pylist()
