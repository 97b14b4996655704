"""Benchmark 3: a scan served from remote log segments, on (moto) S3 and on a ``file://`` directory,
against reading the same objects with the same pyarrow file system and decoding them, with as many
reads in flight as the scanner's remote prefetch."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pyarrow.fs as pafs

import lakelog

from bench import server_host
from bench.cluster import REMOTE_PROPERTIES, BenchCluster
from bench.grpc_baseline import decode
from bench.measure import Result, Trial, medians_in_turns, profile_if_missed, progress
from bench.scan import drain
from bench.server_host import HostedServer
from bench.sizes import Sizes


def segment_paths(server: HostedServer, table: lakelog.Table) -> list[str]:
    """The paths of the table's remote ``.log`` objects, bucket by bucket, oldest first."""
    return server.call(server_host.remote_segment_paths, table.path, table.info.table_id, table.info.buckets)


def read_and_decode(fs: pafs.FileSystem, paths: list[str], in_flight: int) -> int:
    def read(path: str) -> bytes:
        with fs.open_input_file(path) as file:
            return file.read()

    with ThreadPoolExecutor(in_flight) as pool:
        return sum(batch.num_rows for body in pool.map(read, paths) for batch in decode(body))


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    file_server = cluster.start_server("sync", remote="file")
    return [
        _run(cluster, sizes, "3a", "moto S3", cluster.server, cluster.s3.file_system()),
        _run(cluster, sizes, "3b", "file://", file_server, pafs.LocalFileSystem()),
    ]


def _run(cluster: BenchCluster, sizes: Sizes, key: str, where: str, server: HostedServer, fs: pafs.FileSystem) -> Result:
    records = sizes.remote_records
    progress(f"remote tier ({where}): producing {records:,} records, uploading them and deleting the local copies")
    with cluster.connect(server=server) as conn:
        table = cluster.table("remote_tier", REMOTE_PROPERTIES, conn)
        cluster.produce(table, records)
        cluster.to_remote(table, server)
        paths = segment_paths(server, table)
        size = sum(info.size for info in fs.get_file_info(paths))
        in_flight = conn.config.get("client.scanner.remote-log.prefetch-num")

        progress(f"remote tier ({where}): pyarrow baseline and lakelog poll_arrow in turns, {len(paths)} segments, {size / 1e6:,.0f} MB")
        baseline_s, lakelog_s = medians_in_turns(
            sizes.runs, Trial(lambda: read_and_decode(fs, paths, in_flight)), Trial(lambda: drain(table, records))
        )
        result = Result(
            key, f"Remote tier ({where}): poll_arrow", records / lakelog_s, "records/s", records / baseline_s,
            f"pyarrow {type(fs).__name__} read + Arrow IPC decode, {in_flight} in flight", baseline_s / lakelog_s, 0.7,
            detail=f"{size / lakelog_s / 1e6:,.0f} MB/s vs {size / baseline_s / 1e6:,.0f} MB/s; {len(paths)} segments",
            tier=f"remote ({where})",
            next_step="the rest of each segment is read in one GET into memory and decoded in place, in GETs of up to "
            "half of client.scanner.max-buffered-bytes, two at once: with 64mb (the default until this row was "
            "measured at 0.54-0.59x on moto) a segment of the benchmark's 64 MB took two GETs one after the other, and "
            "moto reads a whole object for each ranged GET; with 128mb 0.93-0.98x. What is left is CRC and decode on the "
            "polling thread: run them on the download threads, so the GETs and the checks of different segments overlap",
        )
        profile_if_missed(result, lambda: drain(table, records))
        cluster.drop(table, server)
    return result
