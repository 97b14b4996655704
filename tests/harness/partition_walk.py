"""The partitioned tables a random walk drives alongside its table (docs/contract.md, "Partitioned tables and bucket keys"): one
lake-enabled, one without the lake, both partitioned by ``dt``.

Steps: write to one or two partitions (a new name is created by the writer), create a partition,
drop one (a lake-enabled table's only once the lake holds all of it: else the drop is refused, and
the walk checks the refusal was due; then it is lake-only and read from the lake).

Checks after every step of the walk: the partition list (ids, names, lake-only) is the oracle's,
``list_offsets`` of every partition of a table a partition step changed, else of a random one (the
lake answers for a lake-only one), and, of a random partition, the earliest offset and a
timestamp's; a reader of a random partition's bucket from a random offset
returns exactly the oracle's records; a long-lived ``subscribe_from_beginning`` reader per table
sees every (partition, bucket) exactly once, in order, reads a dropped lake-enabled partition on
from the lake and ends a dropped partition of the table without the lake quietly.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa
import pytest

import lakelog
from tests.harness.cluster import TABLE_PROPERTIES, Cluster
from tests.harness.oracle import Partition, PartitionedOracle
from tests.harness.tables import ORDERS_SCHEMA, order_rows, scan_all

BUCKETS = 2
NAMES = [f"d{n}" for n in range(10)]
SCHEMA = ORDERS_SCHEMA.append(pa.field("dt", pa.string()))
LAKE = lakelog.TablePath("walk", "days")
LOG_ONLY = lakelog.TablePath("walk", "days_log")
# Without the lake nothing may expire in a walk (its expire step is two days): every offset stays readable.
LOG_ONLY_PROPERTIES = {"table.log.ttl": "30d", "table.log.tiered.local-segments": "2"}


def day_rows(name: str, start: int, count: int) -> pa.Table:
    return pa.Table.from_batches([order_rows(start, count)]).append_column("dt", pa.array([name] * count, pa.string()))


@dataclass
class PartitionedTables:
    rng: random.Random
    cluster: Cluster
    connection: Callable[[], lakelog.Connection]
    outage_errors: tuple[type[Exception], ...]
    read_limit: int
    catch_up_s: float
    oracles: dict[lakelog.TablePath, PartitionedOracle] = field(
        default_factory=lambda: {LAKE: PartitionedOracle(BUCKETS, True), LOG_ONLY: PartitionedOracle(BUCKETS, False)}
    )
    followers: dict[lakelog.TablePath, lakelog.LogScanner] = field(default_factory=dict)
    followed: dict[lakelog.TablePath, dict[tuple[int, int], int]] = field(default_factory=dict)
    # Tables a partition step changed since the last check: all their partitions' offsets are checked
    # (of the others, one random partition's: the walk's time stays about what it was without them).
    changed: set[lakelog.TablePath] = field(default_factory=set)

    def create_tables(self) -> None:
        admin = self.connection().admin
        admin.create_table(LAKE, lakelog.TableDescriptor(SCHEMA, BUCKETS, TABLE_PROPERTIES, partition_keys=["dt"]))
        admin.create_table(LOG_ONLY, lakelog.TableDescriptor(SCHEMA, BUCKETS, LOG_ONLY_PROPERTIES, partition_keys=["dt"]))
        for path in self.oracles:
            self.followers[path] = self._table(path).new_scan().create_log_scanner()
            self.followers[path].subscribe_from_beginning()
            self.followed[path] = {}

    def close(self) -> None:
        for follower in self.followers.values():
            follower.close()

    def _table(self, path: lakelog.TablePath) -> lakelog.Table:
        return self.connection().get_table(path)

    def _ids(self, path: lakelog.TablePath) -> dict[str, int]:
        return {p.partition_name: p.partition_id for p in self.connection().admin.list_partition_infos(path) if not p.lake_only}

    # steps

    def produce(self, next_id: int) -> tuple[str, int]:
        """Write to one or two partitions of a random table, each with a writer of its own (an
        acknowledgement names a bucket, not a partition); what was done and the ids used."""
        path = self.rng.choice(list(self.oracles))
        self.changed.add(path)
        oracle = self.oracles[path]
        lake_only = {p.name for p in oracle.current().values() if p.lake_only}
        names = self.rng.sample([n for n in NAMES if n not in lake_only], self.rng.randint(1, 2))
        done = []
        for name in names:
            count = self.rng.choice([1, 7, 50, 300])
            bucket = self.rng.randrange(BUCKETS)
            acks: list[lakelog.AppendAck] = []
            writer = self._table(path).new_append().create_writer(on_ack=acks.append)
            writer.append_arrow(day_rows(name, next_id, count), bucket=bucket)
            writer.close()
            assert len(acks) == 1, f"one append, {len(acks)} acknowledgements"
            partition = oracle.current().get(name) or oracle.create(name, self._ids(path)[name])
            partition.oracle.acknowledge(acks[0], list(range(next_id, next_id + count)))
            next_id += count
            done.append(f"{count} to {name} (id {partition.partition_id}) bucket {bucket}")
        return f"produce to {path.table}: {', '.join(done)}", next_id

    def create(self) -> str:
        path = self.rng.choice(list(self.oracles))
        self.changed.add(path)
        oracle = self.oracles[path]
        name = self.rng.choice(NAMES)
        existing = oracle.current().get(name)
        admin = self.connection().admin
        if existing is not None:
            with pytest.raises(lakelog.PartitionAlreadyExistsError):
                admin.create_partition(path, {"dt": name})
            return f"create partition {name} of {path.table}: exists{' (lake only)' if existing.lake_only else ''}, refused"
        partition = oracle.create(name, admin.create_partition(path, {"dt": name}))
        return f"create partition {name} of {path.table} (id {partition.partition_id})"

    def drop(self) -> str:
        path = self.rng.choice(list(self.oracles))
        self.changed.add(path)
        oracle = self.oracles[path]
        live = oracle.live()
        if not live:
            return f"drop a partition of {path.table}: skipped (none)"
        partition = self.rng.choice(live)
        admin = self.connection().admin
        what = f"drop partition {partition.name} (id {partition.partition_id}) of {path.table}"
        try:
            admin.drop_partition(path, {"dt": partition.name})
        except lakelog.errors.PartitionNotInLakeError:
            assert oracle.lake_enabled, f"{what}: refused, but the table has no lake"
            if self.cluster.s3_down:  # a leader describes a bucket with its remote manifest
                return f"{what}: refused while S3 is down"
            described = admin.describe_buckets(path, partition_name=partition.name)
            short = [b for b, info in described.items() if max(info.lake_log_end_offset, 0) < partition.oracle.high_watermark(b)]
            assert short, f"{what}: refused though the lake holds all of it ({described})"
            return f"{what}: refused, the lake lacks buckets {short}"
        oracle.drop(partition)
        return f"{what}{': lake only now' if partition.lake_only else ''}"

    # checks

    def check(self, where: str) -> None:
        admin = self.connection().admin
        for path, oracle in self.oracles.items():
            listed = sorted((p.partition_id, p.partition_name, p.lake_only) for p in admin.list_partition_infos(path))
            assert listed == oracle.listing(), f"{where}: partitions of {path} {listed}, oracle {oracle.listing()}"
            current = sorted(oracle.current().values(), key=lambda p: p.partition_id)
            for partition in current if path in self.changed else self.rng.sample(current, min(1, len(current))):
                latest = admin.list_offsets(path, partition_name=partition.name)
                expected = {b: partition.oracle.high_watermark(b) for b in range(BUCKETS)}
                assert latest == expected, f"{where}: latest of {path} partition {partition.name}: {latest}, oracle {expected}"
        self.changed.clear()
        if not self.cluster.s3_down:
            self._check_offsets(where)
        self._random_reader(where)
        for path in self.oracles:
            self._follow(path, where)

    def _random_partition(self) -> tuple[lakelog.TablePath, Partition] | None:
        path = self.rng.choice(list(self.oracles))
        current = sorted(self.oracles[path].current().values(), key=lambda p: p.partition_id)
        return (path, self.rng.choice(current)) if current else None

    def _check_offsets(self, where: str) -> None:
        picked = self._random_partition()
        if picked is None:
            return
        path, partition = picked
        admin = self.connection().admin
        earliest = admin.list_offsets(path, spec=lakelog.OffsetSpec.earliest(), partition_name=partition.name)
        assert earliest == {b: 0 for b in range(BUCKETS)}, f"{where}: earliest of {path} partition {partition.name}: {earliest}"
        bucket = self.rng.randrange(BUCKETS)
        stamps = partition.oracle.timestamps[bucket]
        if not stamps:
            return
        timestamp = self.rng.choice([self.rng.choice(stamps), stamps[0] - 1000, stamps[-1] + 1])
        found = admin.list_offsets(path, [bucket], lakelog.OffsetSpec.timestamp(timestamp), partition.name)[bucket]
        expected = partition.oracle.offset_for_timestamp(bucket, timestamp)
        assert found == expected, f"{where}: timestamp {timestamp} of {path} partition {partition.name} bucket {bucket} -> {found}, oracle {expected}"

    def _random_reader(self, where: str) -> None:
        picked = self._random_partition()
        if picked is None:
            return
        path, partition = picked
        bucket = self.rng.randrange(BUCKETS)
        end = partition.oracle.high_watermark(bucket)
        start = self.rng.randint(0, end)
        stop = min(end, start + self.read_limit)
        with self._table(path).new_scan().create_log_scanner() as scanner:
            try:
                scanner.subscribe_partition(partition.partition_id, bucket, start)
                read = scan_all(scanner, stop - start, self.catch_up_s).slice(0, stop - start)
            except self.outage_errors:
                if not self.cluster.s3_down:
                    raise
                return
        partition.oracle.check(read, bucket, start, f"{where}: reader of {path} partition {partition.name} bucket {bucket} from {start}")

    def _follow(self, path: lakelog.TablePath, where: str) -> None:
        """The long-lived reader of ``path`` catches up with every (partition, bucket) listed, and
        lets go of every partition dropped without the lake."""
        oracle, follower, followed = self.oracles[path], self.followers[path], self.followed[path]
        ends = {(p.partition_id, b): p.oracle.high_watermark(b) for p in oracle.current().values() for b in range(BUCKETS)}
        ended = {p.partition_id for p in oracle.by_id.values() if p.ended}
        deadline = time.monotonic() + self.catch_up_s
        while any(followed.get(key, 0) < end for key, end in ends.items()) or ended & {pid for pid, _ in follower.positions()}:
            assert time.monotonic() < deadline, (
                f"{where}: the long-lived reader of {path} is stuck at {followed}, positions {follower.positions()}, oracle {ends}"
            )
            try:
                records = follower.poll(timeout_ms=500)
            except self.outage_errors:
                if self.cluster.s3_down:
                    return
                raise
            for key in records.buckets():
                partition_id, bucket = key
                table = records.to_arrow(key)
                oracle.by_id[partition_id].oracle.check(table, bucket, followed.get(key, 0), f"{where}: long-lived reader of {path}")
                followed[key] = followed.get(key, 0) + table.num_rows
