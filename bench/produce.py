"""Benchmark 6: producing with the writer (``append_arrow``) to a server in the default ``sync``
flush mode (fsync before the ack) and in ``async`` mode, against a bare grpcio server that only
acknowledges, fed the same batches encoded as Arrow IPC with as many requests in flight; every
server in a process of its own."""

from __future__ import annotations

import itertools
from pathlib import Path

import lakelog
import pyarrow as pa

from bench import data, grpc_baseline, server_host
from bench.cluster import BenchCluster
from bench.measure import Result, median_seconds, profile_if_missed, progress
from bench.sizes import Sizes


def write(table: lakelog.Table, batches: list[pa.RecordBatch]) -> None:
    with table.new_append().create_writer() as writer:  # close() flushes: every record acknowledged
        for batch in batches:
            writer.append_arrow(batch)


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    records = sizes.produce_records
    batches = data.chunks(records)
    conf = cluster.conn.config

    def baseline(append_to: Path | None) -> float:
        with server_host.HostedBaseline(append_to=append_to) as server:
            return median_seconds(
                lambda: grpc_baseline.produce_all(
                    server.address, batches, conf.get("client.writer.batch-size"), conf.get("client.writer.max-inflight")
                ),
                sizes.runs,
            )

    progress(f"produce: bare grpcio baseline, {records:,} records")
    baseline_s = baseline(None)
    progress("produce: grpcio baseline that appends each request to a file")
    appended = cluster.directory / "produce-baseline.log"
    writing_baseline_s = baseline(appended)
    appended.unlink()
    names = itertools.count()
    results = []
    seconds: dict[str, float] = {}
    for key, mode, target in (("6a", "sync", None), ("6b", "async", 0.6)):
        server = cluster.server if mode == "sync" else cluster.start_server(mode)
        with cluster.connect(server=server) as conn:
            tables: list[lakelog.Table] = []
            progress(f"produce: lakelog writer, log.flush.mode={mode}")
            produce_s = median_seconds(
                lambda: write(tables[-1], batches),
                sizes.runs,
                before=lambda: tables.append(cluster.table(f"produce_{mode}_{next(names)}", conn=conn)),
            )
            seconds[mode] = produce_s
            result = Result(
                key, f"Produce: append_arrow, {mode} flush", records / produce_s, "records/s", records / baseline_s,
                "bare grpcio server, same batches as Arrow IPC, same requests in flight", baseline_s / produce_s, target,
                detail=f"{records:,} records in batches of {data.CHUNK_RECORDS:,}", tier=f"produce ({mode})",
                next_step="the server's allocator setting, the crc32c CRC, a request parsed by hand into views of the "
                "received message, an append that writes each batch's stamped header and its received body with one "
                "pwritev, and a writer that encodes each batch into a buffer of its final size took server CPU per 2 M "
                "records from about 0.3 s to 0.17-0.25 s and the writer's to 0.18-0.22 s; the wall time (0.24-0.32 s "
                "in runs of this group alone, 0.55-0.6x) is latency per request with 8 in flight. The copy that joins a "
                "request stays: grpcio takes a request as bytes and copies it into its own buffer, so a request built "
                "in place would be copied once more into bytes. In full runs this row moves most (0.38x, 0.65x, 0.33x over three), "
                "and the cause is the kernel's buffered write, not lakelog's code: each timed run probed in a full run "
                "(CPU, syscalls and page faults per process from /proc, the server's stacks by py-spy and /proc/PID/stack) "
                "shows the same requests taking the server 0.18-0.23 s of CPU in some runs and 0.5-0.57 s in others, "
                "both servers, with fewer syscalls and no more page faults in the slow ones, the writer's CPU unchanged, "
                "and the extra time in pwritev (generic_perform_write, copying into the page cache: 75-80 samples "
                "against 3-7). The likely cause: this VM's balloon reports free pages to its host (virtio_balloon free page "
                "reporting), so a new page-cache page may have to be backed by the host again on its first write; not "
                "proven (160 MB written just after 6 GB were freed took 53 ms against 37 ms). The bare grpcio baseline "
                "writes nothing; row 6c puts the same run against a baseline that appends each request to a file",
            )
            if target is not None:
                tables.append(cluster.table(f"produce_{mode}_{next(names)}", conn=conn))
                profile_if_missed(result, lambda: write(tables[-1], batches))
            for table in tables:
                conn.admin.drop_table(table.path)
            results.append(result)
    async_s = seconds["async"]
    results.append(
        Result(
            "6c", "Produce: append_arrow, async flush, against a baseline that writes", records / async_s, "records/s",
            records / writing_baseline_s, "grpcio server appending each request to a file, same batches and requests in "
            "flight", writing_baseline_s / async_s, None, detail=f"{records:,} records; row 6b's run (no chart bar of its own)",
        )
    )
    return results
