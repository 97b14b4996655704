"""Every Arrow type the lake stores, its Iceberg type and values that test its range."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa

SUPPORTED: list[tuple[pa.DataType, str, list[Any]]] = [
    (pa.bool_(), "boolean", [True, None]),
    (pa.int8(), "int", [-128, 127]),
    (pa.int16(), "int", [-32768, None]),
    (pa.int32(), "int", [2**31 - 1, -(2**31)]),
    (pa.int64(), "long", [2**63 - 1, -(2**63)]),
    (pa.uint8(), "int", [255, 0]),
    (pa.uint16(), "int", [65535, None]),
    (pa.uint32(), "long", [2**32 - 1, 0]),
    (pa.float16(), "float", [1.5, None]),
    (pa.float32(), "float", [0.25, -1.0]),
    (pa.float64(), "double", [1e300, None]),
    (pa.string(), "string", ["héllo", None]),
    (pa.large_string(), "string", ["x" * 1000, ""]),
    (pa.binary(), "binary", [b"\x00\xff", None]),
    (pa.large_binary(), "binary", [b"big", b""]),
    (pa.binary(3), "fixed[3]", [b"abc", None]),
    (pa.date32(), "date", [datetime.date(2024, 2, 29), None]),
    (pa.date64(), "date", [datetime.date(1969, 12, 31), datetime.date(2038, 1, 19)]),
    (pa.timestamp("s"), "timestamp", [datetime.datetime(2024, 1, 1, 12), None]),
    (pa.timestamp("ms"), "timestamp", [datetime.datetime(2024, 1, 1, 12, 0, 0, 123000), None]),
    (pa.timestamp("us"), "timestamp", [datetime.datetime(2024, 1, 1, 12, 0, 0, 123456), None]),
    (pa.timestamp("us", tz="UTC"), "timestamptz", [datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc), None]),
    (
        pa.timestamp("ms", tz="Asia/Kolkata"),
        "timestamptz",
        [datetime.datetime(2024, 6, 1, 5, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=5, minutes=30))), None],
    ),
    (pa.time32("s"), "time", [datetime.time(23, 59, 59), None]),
    (pa.time32("ms"), "time", [datetime.time(1, 2, 3, 4000), None]),
    (pa.time64("us"), "time", [datetime.time(1, 2, 3, 456789), None]),
    (pa.decimal128(38, 10), "decimal(38, 10)", [Decimal("1234567890123456789012345678.0123456789"), None]),
    (pa.decimal128(5, 2), "decimal(5, 2)", [Decimal("-999.99"), Decimal("0.01")]),
    (pa.dictionary(pa.int8(), pa.string()), "string", ["red", "red"]),
    (pa.list_(pa.int32()), "list<int>", [[1, None, 3], None]),
    (pa.large_list(pa.string()), "list<string>", [["a"], []]),
    (pa.list_(pa.float64(), 2), "list<double>", [[1.0, 2.0], None]),
    (pa.struct([("x", pa.int32()), ("y", pa.string())]), "struct<", [{"x": 1, "y": "a"}, None]),
    (pa.map_(pa.string(), pa.int64()), "map<string, long>", [[("k", 1)], None]),
]
