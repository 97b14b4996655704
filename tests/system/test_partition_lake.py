"""The lake per partition, end to end: a day-partitioned lake-enabled table on a real server with
remote storage on moto S3, a real PyIceberg SQLite catalog and the tiering job on the shared local
SparkSession. Every partition goes local -> remote -> lake; one expires from the log by
auto-partition retention (only once the lake holds it) and is then read from the lake alone."""

from __future__ import annotations

import datetime
import json
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.lake.snapshot_summary import BUCKET_OFFSETS, latest_lake_snapshot
from lakelog.server.server_process import ServerProcess
from lakelog.server.status.cluster_status import ClusterStatus
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.harness.lake_tier import expire_remote, lake_table
from tests.harness.partitioned_lake import BUCKETS, LAKE, RETENTION, ROWS, SCHEMA, scan_exactly, write_days
from tests.harness.s3 import MotoS3

PATH = lakelog.TablePath("shop", "clicks")


def _by_log(rows: pa.Table) -> dict[tuple[int, int], list[int]]:
    """Offsets per (partition id, bucket), in the order they were returned."""
    found: dict[tuple[int, int], list[int]] = {}
    for pid, bucket, offset in zip(*(rows.column(c).to_pylist() for c in ("__partition_id", "__bucket", "__offset"))):
        found.setdefault((pid, bucket), []).append(offset)
    return found


def test_each_partition_tiers_to_the_lake_and_an_expired_one_is_read_from_the_lake(
    spark: Any, server_factory: Callable[..., ServerProcess], moto_s3: MotoS3
) -> None:
    remote = {
        "remote.data.dir": f"s3://{moto_s3.create_bucket()}/lakelog",
        **moto_s3.settings(),
        "log.segment.max-bytes": "64kb",
        "remote.log.task-interval": "1h",
        "coordinator.auto-partition.check-interval": "1h",
    }
    server = server_factory(**remote)
    assert server.coordinator is not None and server.tablet is not None
    auto = server.coordinator.coordinator.auto_partitioner
    today = datetime.datetime.now(datetime.timezone.utc).date()
    old, kept, now = (today - datetime.timedelta(days=n) for n in (5, 1, 0))
    old_day, kept_day, today_day = (d.strftime("%Y%m%d") for d in (old, kept, now))
    client_conf = {k: v for k, v in remote.items() if k.startswith("remote.fs.")}
    with lakelog.connect(server.address, {**client_conf, "client.lake.source": "iceberg-arrow"}) as conn:
        conn.admin.create_database("shop", ignore_if_exists=True)
        descriptor = lakelog.TableDescriptor(SCHEMA, BUCKETS, {**LAKE, **RETENTION}, partition_keys=["dt"])
        conn.admin.create_table(PATH, descriptor)
        table = conn.get_table(PATH)
        conn.admin.create_partition(PATH, {"dt": old_day})
        conn.admin.create_partition(PATH, {"dt": kept_day})
        days = [old_day, kept_day, today_day]
        write_days(table, days, 0)
        server.tablet.remote.run_once()  # uploads the rolled segments
        server.tablet.remote.run_once()  # then deletes the uploaded ones past the local one kept
        ids = {p.partition_name: p.partition_id for p in conn.admin.list_partition_infos(PATH) if p.partition_name in days}
        for day in days:
            for bucket, info in conn.admin.describe_buckets(PATH, partition_name=day).items():
                assert info.remote_log_start_offset == 0 and info.local_log_start_offset > 0, (day, bucket, info)

        # Retention cannot drop a partition the lake does not hold yet.
        auto.check_all()
        assert old_day in {p.partition_name for p in conn.admin.list_partition_infos(PATH) if not p.lake_only}
        with pytest.raises(lakelog.LakelogError, match=f"partition {old_day} .* keeps its log until the lake holds all of it"):
            conn.admin.drop_partition(PATH, {"dt": old_day})

        with TieringJob(TieringOptions(server.address, client_config=client_conf), spark=spark) as job:
            report = job.run_round()
        assert report.records == 3 * ROWS
        highs = {(ids[day], b): hw for day in days for b, hw in conn.admin.list_offsets(PATH, partition_name=day).items()}
        assert sum(highs.values()) == 3 * ROWS

        # The lake: partitioned by dt then __bucket; its summary keys buckets "<partition_id>:<bucket>".
        iceberg = lake_table(server, PATH)
        assert [f.name for f in iceberg.spec().fields] == ["dt", "__bucket"]
        assert {f"{pid}:{b}" for pid, b in highs} == set(json.loads(iceberg.current_snapshot().summary[BUCKET_OFFSETS]))
        lake = conn.admin.get_lake_snapshot(PATH)
        assert lake == latest_lake_snapshot(iceberg)
        assert {key: o.log_end_offset for key, o in lake.bucket_offsets.items()} == highs
        lake_rows = iceberg.scan(row_filter=f"dt == '{kept_day}'").to_arrow()
        assert lake_rows.num_rows == ROWS and set(lake_rows.column("dt").to_pylist()) == {kept_day}
        for day in days:  # the coordinator told each partition's leader what the lake holds
            described = conn.admin.describe_buckets(PATH, partition_name=day)
            assert {b: (i.lake_log_start_offset, i.lake_log_end_offset) for b, i in described.items()} == {
                b: (0, highs[ids[day], b]) for b in range(BUCKETS)
            }

        # Remote segments past their TTL go, since the lake holds them; today gets untiered records.
        expire_remote(server.tablet.remote)
        write_days(table, [today_day], ROWS)
        for day in (kept_day, today_day):
            for info in conn.admin.describe_buckets(PATH, partition_name=day).values():
                assert info.remote_log_start_offset > 0 or info.remote_log_start_offset == -1, info

        # Now the expired partition goes, from the log only.
        auto.check_all()
        listed = {p.partition_name: p for p in conn.admin.list_partition_infos(PATH)}
        assert listed[old_day].lake_only and not listed[kept_day].lake_only
        # Its log is gone: its buckets have no leader, and describe and list_offsets answer from the lake.
        gone = conn.admin.describe_buckets(PATH, partition_name=old_day)
        assert {b: (i.leader, i.high_watermark, i.local_log_start_offset, i.remote_log_start_offset, i.lake_log_start_offset,
                    i.lake_log_end_offset) for b, i in gone.items()} == {
            b: (-1, highs[ids[old_day], b], -1, -1, 0, highs[ids[old_day], b]) for b in range(BUCKETS)
        }
        assert conn.admin.list_offsets(PATH, partition_name=old_day) == {b: highs[ids[old_day], b] for b in range(BUCKETS)}
        assert conn.admin.list_offsets(PATH, [1], lakelog.OffsetSpec.earliest(), partition_name=old_day) == {1: 0}
        with pytest.raises(lakelog.PartitionAlreadyExistsError, match="lake only"):
            conn.admin.create_partition(PATH, {"dt": old_day})
        # The status page lists the buckets per partition, the lake-only one without any.
        page = ClusterStatus(server.coordinator.coordinator, server.coordinator.tablets).snapshot()
        (shown,) = [t for t in page["tables"] if t["table"] == str(PATH)]
        by_name = {p["partition_name"]: p for p in shown["partitions"]}
        assert by_name[old_day]["lake_only"] and by_name[old_day]["buckets"] == []
        assert [b["high_watermark"] for b in by_name[kept_day]["buckets"]] == [highs[ids[kept_day], b] for b in range(BUCKETS)]
        assert by_name[kept_day]["buckets"][0]["tiers"]["lake"]["end"] == highs[ids[kept_day], 0]
        assert shown["lake"]["offsets_behind"] == ROWS  # today's second write, not tiered yet

        # A scan from the beginning: every record of every partition exactly once, in offset order
        # per (partition, bucket); the expired one from the lake.
        total = 4 * ROWS
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_beginning()
            rows = scan_exactly(scanner, total)
            tiers = scanner.records_by_tier()
        assert rows.num_rows == total
        expected = dict(highs)
        expected.update({(ids[today_day], b): hw for b, hw in conn.admin.list_offsets(PATH, partition_name=today_day).items()})
        assert _by_log(rows) == {key: list(range(end)) for key, end in expected.items() if end}
        for day, count in ((old_day, ROWS), (kept_day, ROWS), (today_day, 2 * ROWS)):
            mine = rows.filter(pc.equal(rows.column("dt"), day))
            assert sorted(mine.column("id").to_pylist()) == list(range(count))
            assert set(mine.column("__partition_id").to_pylist()) == {ids[day]}
        assert tiers.get("lake", 0) >= 2 * ROWS and tiers.get("local", 0) > 0, tiers

        # Timestamp lookups per partition: the lake answers where only the lake holds the offset.
        timestamps = {key: rows.filter(pc.and_(pc.equal(rows.column("__partition_id"), key[0]), pc.equal(rows.column("__bucket"), key[1])))
                      .column("__timestamp").to_pylist() for key in expected}
        for day in (kept_day, today_day):
            described = conn.admin.describe_buckets(PATH, partition_name=day)
            for bucket in range(BUCKETS):
                stamps = timestamps[ids[day], bucket]
                middle = stamps[len(stamps) // 4]
                first = stamps.index(middle)
                answer = conn.admin.list_offsets(PATH, [bucket], lakelog.OffsetSpec.timestamp(middle), partition_name=day)[bucket]
                assert answer == first
                info = described[bucket]
                if day == kept_day:  # only the lake holds it: below both the remote and the local start
                    assert info.lake_log_start_offset <= answer < info.lake_log_end_offset
                    assert answer < min(o for o in (info.remote_log_start_offset, info.local_log_start_offset) if o >= 0)
                newest = stamps[-1]
                local = conn.admin.list_offsets(PATH, [bucket], lakelog.OffsetSpec.timestamp(newest), partition_name=day)[bucket]
                assert local == stamps.index(newest) and local >= info.local_log_start_offset
        # The lake-only partition's timestamp lookup goes to the lake alone.
        stamps = timestamps[ids[old_day], 0]
        with table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe_from_timestamp(stamps[len(stamps) // 2])
            since = scan_exactly(scanner, sum(len(s) - _first_at(s, stamps[len(stamps) // 2]) for s in timestamps.values()))
        old_rows = since.filter(pc.equal(since.column("__partition_id"), ids[old_day]))
        looked_up = conn.admin.list_offsets(PATH, spec=lakelog.OffsetSpec.timestamp(stamps[len(stamps) // 2]), partition_name=old_day)
        for bucket in range(BUCKETS):
            got = old_rows.filter(pc.equal(old_rows.column("__bucket"), bucket)).column("__offset").to_pylist()
            start = _first_at(timestamps[ids[old_day], bucket], stamps[len(stamps) // 2])
            assert got == list(range(start, len(timestamps[ids[old_day], bucket])))
            assert looked_up[bucket] == start


def _first_at(stamps: list[int], ms: int) -> int:
    """The first index whose timestamp is at or after ``ms`` (the length when none is)."""
    return next((i for i, stamp in enumerate(stamps) if stamp >= ms), len(stamps))
