"""Benchmarks 1 and 2: reading the local tier with ``poll_arrow``, against a bare grpcio server
returning the same bytes in the same chunks, and a projection of 1 column against all 10. Both
servers run in processes of their own (bench/server_host.py)."""

from __future__ import annotations

import lakelog

from bench import grpc_baseline, server_host
from bench.cluster import BenchCluster, log_bytes
from bench.measure import Result, median_seconds, profile_if_missed, progress
from bench.scan import drain
from bench.sizes import Sizes


def fetch_responses(cluster: BenchCluster, table: lakelog.Table) -> list[bytes]:
    """The record bytes of every FetchLog a full scan of ``table`` gets (:func:`bench.server_host.fetch_responses`)."""
    conf = cluster.conn.config
    per_fetch, per_bucket = conf.get("client.scanner.fetch.max-bytes"), conf.get("client.scanner.fetch.max-bytes-per-bucket")
    return cluster.server.call(server_host.fetch_responses, table.info.table_id, table.info.buckets, per_fetch, per_bucket)


def run(cluster: BenchCluster, sizes: Sizes) -> list[Result]:
    records = sizes.local_records
    progress(f"local tier: producing {records:,} records into a 4-bucket table (10 numeric columns)")
    table = cluster.table("local_tier")
    cluster.produce(table, records)
    size = log_bytes(table, cluster)
    responses = fetch_responses(cluster, table)

    progress(f"local tier: bare grpcio baseline, {len(responses)} responses of {size / len(responses) / 1e6:.1f} MB")
    with server_host.HostedBaseline(responses) as server:
        baseline_s = median_seconds(lambda: grpc_baseline.fetch_all(server.address, len(responses)), sizes.runs)
    progress("local tier: lakelog poll_arrow, all 10 columns")
    full_s = median_seconds(lambda: drain(table, records), sizes.runs)
    progress("local tier: lakelog poll_arrow, 1 of 10 columns")
    projected_s = median_seconds(lambda: drain(table, records, ["i0"]), sizes.runs)

    local = Result(
        "1", "Local tier: poll_arrow", records / full_s, "records/s", records / baseline_s,
        "bare grpcio server, same bytes and chunks, Arrow IPC decode", baseline_s / full_s, 0.7,
        detail=f"{size / full_s / 1e6:,.0f} MB/s vs {size / baseline_s / 1e6:,.0f} MB/s; {records:,} records, {size / 1e6:,.0f} MB",
        tier="local",
        next_step="the server's copies are gone (FetchLog answers are serialized once, server/rpc/fetch_response.py) and "
        "the client decodes in place with meta columns built once per answer; what is left is the client's fetch path: "
        "protobuf parsing copies each bucket's records out of the message and CRC checks and decoding run on the "
        "polling thread; parse the records field as a view of the received message and decode on the fetch thread",
    )
    projection = Result(
        "2", "Projection: 1 of 10 columns", records / projected_s, "records/s", records / full_s,
        "all 10 columns (lakelog)", full_s / projected_s, 5.0, detail="local tier, server-side projection",
        next_step="projection re-encodes every batch on the server (decode, select, IPC encode, CRC); with 1 of 10 "
        "columns that fixed per-batch cost dominates: keep the projection zero-copy by sending the selected column buffers",
    )
    profile_if_missed(local, lambda: drain(table, records))
    profile_if_missed(projection, lambda: drain(table, records, ["i0"]))
    cluster.drop(table)
    return [local, projection]
