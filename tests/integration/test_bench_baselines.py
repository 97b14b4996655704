"""The benchmarks' grpcio baselines do the work their rows say they do: the writing produce baseline
(row 6c) appends every request it acknowledges, whole, so the kernel's write it was added to measure
is really in it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from bench import data
from bench.grpc_baseline import BaselineServer, produce_all


def _streams(buf: pa.Buffer) -> list[pa.Table]:
    """The Arrow IPC streams written one after another into ``buf``."""
    reader = pa.BufferReader(buf)
    tables = []
    while reader.tell() < buf.size:
        tables.append(pa.ipc.open_stream(reader).read_all())
    return tables


def test_writing_baseline_appends_every_request_whole(tmp_path: Path) -> None:
    log = tmp_path / "requests.log"
    batches = data.chunks(50_000, size=5_000)
    with BaselineServer(append_to=log) as server:
        sent = produce_all(server.address, batches, batch_bytes=100_000, in_flight=4)
    assert sent == 50_000
    streams = _streams(pa.py_buffer(log.read_bytes()))
    assert len(streams) == 40  # 100 kB requests of 80-byte records: 1,250 records each
    written = pa.concat_tables(streams).sort_by("i0")
    assert written.equals(pa.Table.from_batches(batches))
