"""The record format (version 2) as a user meets it: Arrow arrays decoded from any tier are aligned,
so compute on scanner output runs without Acero's "poorly aligned" warning; files of format 1 (an
older lakelog) stop the server with an error naming the file and the version, and are kept as they
were, never truncated as if torn.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import lakelog
from lakelog.errors import RecordFormatError
from lakelog.record.batch import body, iter_headers
from tests.harness.remote_tier import BASE_CONF, produce, remote_manager
from tests.harness.tables import create_table

# What lakelog 0.1's format 1 wrote: a 35-byte header (magic 1, zlib's CRC-32) and the Arrow body.
_FORMAT_1_HEADER = struct.Struct(">qibqIihi")

_SCAN_AND_GROUP = """
import sys
import lakelog
import pyarrow as pa

with lakelog.connect(sys.argv[1]) as conn:
    table = conn.get_table(lakelog.TablePath("shop", "orders"))
    with table.new_scan().create_log_scanner() as scanner:
        scanner.subscribe_from_beginning()
        polled = []
        while sum(t.num_rows for t in polled) < int(sys.argv[2]):
            polled.append(scanner.poll_arrow(500))
        tiers = scanner.records_by_tier()
    data = pa.concat_tables(polled)
    grouped = data.group_by("__bucket").aggregate([("id", "sum"), ("amount", "mean"), ("__offset", "max")])
    print(grouped.column("id_sum")[0].as_py(), tiers["remote"], tiers["local"])
"""


def as_format_1(records: bytes) -> bytes:
    """The same batches as lakelog 0.1 stored them."""
    out = bytearray()
    for pos, header in iter_headers(records):
        arrow = body(records, pos, header).to_pybytes()
        tail = struct.pack(">ihi", header.schema_id, header.attributes, header.record_count)
        crc = zlib.crc32(arrow, zlib.crc32(tail))
        out += _FORMAT_1_HEADER.pack(
            header.base_offset, _FORMAT_1_HEADER.size - 12 + len(arrow), 1, header.commit_timestamp, crc,
            header.schema_id, header.attributes, header.record_count,
        )
        out += arrow
    return bytes(out)


def test_compute_on_scanned_records_from_local_and_remote_is_aligned(server_factory, tmp_path: Path) -> None:
    """A scan across remote and local segments, then Acero's group_by, in a fresh process: Arrow
    prints its alignment warning to that process's stderr if any decoded buffer is misaligned."""
    server = server_factory(**{**BASE_CONF, "log.segment.max-bytes": "16kb", "remote.data.dir": (tmp_path / "remote").as_uri()})
    with lakelog.connect(server.address) as conn:
        table = create_table(conn)
        produce(table, 40)
        assert remote_manager(server).run_once().deleted_local > 0
        produce(table, 5, first_id=4000)
    expected_sum = sum(range(4000)) + sum(range(4000, 4500))

    run = subprocess.run(
        [sys.executable, "-c", _SCAN_AND_GROUP, server.address, "4500"],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr

    id_sum, remote_records, local_records = map(int, run.stdout.split())
    assert id_sum == expected_sum
    assert remote_records > 0 and local_records > 0, "both tiers were read"
    assert "poorly aligned" not in run.stderr


@pytest.mark.parametrize("shutdown", ["clean", "crash"])
def test_format_1_segment_is_refused_naming_file_and_version(server_factory, tmp_path: Path, shutdown: str) -> None:
    data_dir = tmp_path / "data"
    server = server_factory(data_dir)
    with lakelog.connect(server.address) as conn:
        produce(create_table(conn), 3)
    server.stop()
    segment = next((data_dir / "tablet-server" / "log").glob("*/0/*.log"))
    segment.write_bytes(as_format_1(segment.read_bytes()))
    old_bytes = segment.read_bytes()
    if shutdown == "crash":
        (segment.parent / ".clean-shutdown").unlink()

    with pytest.raises(RecordFormatError) as refused:
        server_factory(data_dir)

    assert str(segment) in refused.value.message
    assert "record format version 1" in refused.value.message and "version 2 only" in refused.value.message
    assert segment.read_bytes() == old_bytes, "an old file is kept as it was"
