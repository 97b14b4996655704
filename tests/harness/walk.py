"""One seeded random walk: random tier transitions, and after every step, readers that must return
exactly what the oracle says.

Steps: produce batches of random sizes, roll a segment, upload (which also deletes local segments
past ``table.log.tiered.local-segments``), run a tiering round, expire remote segments, compact the lake table's files and expire its
replaced snapshots, restart the
tablet server, restart the coordinator, kill the tiering job mid-round (a real SIGKILL of a
``lakelog tier`` process, the next round being its restart), stop and start S3; and the
faults that must fail closed: a bucket's remote manifest deleted or damaged (the restarted server
fails closed, then ``lakelog repair remote`` rebuilds it), a rolled local segment damaged (quarantined: served from its
remote copy, or, never uploaded, a named CorruptRecordError until the file is restored), and
hostile clients (idle long polls and never-read FetchLog streams) left open across the next steps.

After every step: a reader from a random offset or timestamp reads a stretch of a random bucket
and compare it with the oracle record by record; ``list_offsets`` (earliest, latest, by timestamp)
must agree with the oracle; one long-lived reader keeps polling across all steps and must see every
bucket's log exactly once, in order. While S3 is down a reader may fail with a retriable error, never
with wrong data.
"""

from __future__ import annotations

import random
import signal
import time
from dataclasses import dataclass, field
from typing import Callable, ClassVar

import pyarrow as pa

import lakelog
from bench.hostile_clients import HostileLoad
from tests.harness.cluster import TABLE_PROPERTIES, Cluster
from tests.harness.oracle import Oracle
from tests.harness.partition_walk import PartitionedTables
from tests.harness.tables import ORDERS_SCHEMA, order_rows, scan_all
from tests.harness.waiting import wait_until

BUCKETS = 3
READ_LIMIT = 1000
CATCH_UP_S = 60.0
OUTAGE_ERRORS = (lakelog.errors.RemoteStorageError, lakelog.errors.LakeError, lakelog.NetworkError)
PATH = lakelog.TablePath("walk", "events")

# name -> weight; the slow steps (a Spark round, a killed `lakelog tier` process) are rarer.
STEP_WEIGHTS = {
    "produce": 30,
    "roll": 8,
    "upload": 10,
    "tier": 2,
    "expire": 5,
    "restart_tablet": 3,
    "restart_coordinator": 3,
    "kill_tiering": 0.1,
    "toggle_s3": 3,
    "damage_manifest": 1,
    "damage_segment": 1.5,
    "toggle_hostile": 2,
    "produce_partition": 12,
    "create_partition": 2,
    "drop_partition": 3,
    "alter": 1,
    "compact_lake": 0.7,
    "expire_lake": 0.7,
}
# Short enough that snapshots a compaction replaced go within a few steps, long enough that a reader
# holding one mid-read (a step's readers finish within it) is never in the way.
LAKE_SNAPSHOT_RETENTION = {"table.datalake.snapshot-retention": "3s"}
MAX_ADDED_COLUMNS = 4
HOSTILE_POLLS = 20
HOSTILE_STREAMS = 4
IDLE = lakelog.TablePath("walk", "idle")


@dataclass
class Walk:
    seed: int
    steps: int
    cluster: Cluster
    rng: random.Random = field(init=False)
    oracle: Oracle = field(default_factory=lambda: Oracle(BUCKETS))
    history: list[str] = field(default_factory=list)
    next_id: int = 0
    conn: lakelog.Connection | None = None
    follower: lakelog.LogScanner | None = None
    followed: dict[int, int] = field(default_factory=dict)
    coordinator_may_lag: bool = False
    hostile: HostileLoad | None = None
    partitioned: PartitionedTables = field(init=False)
    # The walk's steps (name -> weight) and the test that replays a seed.
    step_weights: ClassVar[dict[str, float]] = STEP_WEIGHTS
    replay_test: ClassVar[str] = "tests/system/test_random_walk.py -k 'not replicated'"
    replay_variables: ClassVar[tuple[str, str]] = ("LAKELOG_WALK_SEEDS", "LAKELOG_WALK_STEPS")  # seeds, steps

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.partitioned = PartitionedTables(self.rng, self.cluster, self._connection, OUTAGE_ERRORS, READ_LIMIT, CATCH_UP_S)

    def _connection(self) -> lakelog.Connection:
        assert self.conn is not None
        return self.conn

    # the walk

    def run(self) -> None:
        self.cluster.start()
        try:
            self.conn = self.cluster.connect()
            self._create_tables(self.conn.admin)
            self._new_follower()
            names = list(self.step_weights)
            weights = [self.step_weights[name] for name in names]
            for number in range(self.steps):
                name = self.rng.choices(names, weights)[0]
                step: Callable[[], str] = getattr(self, f"_step_{name}")
                self.history.append(f"{number}: {step()}")
                self._check(number)
        except BaseException as exc:
            raise AssertionError(self._replay(exc)) from exc
        finally:
            self._close()

    def _create_tables(self, admin: lakelog.Admin) -> None:
        admin.create_database(PATH.database, ignore_if_exists=True)
        admin.create_table(PATH, lakelog.TableDescriptor(ORDERS_SCHEMA, BUCKETS, {**TABLE_PROPERTIES, **LAKE_SNAPSHOT_RETENTION}))
        admin.create_table(IDLE, lakelog.TableDescriptor(ORDERS_SCHEMA, 1))
        self.partitioned.create_tables()

    def _close(self) -> None:
        if self.hostile is not None:
            self.hostile.close()
        self.partitioned.close()
        if self.conn is not None:
            self.conn.close()
        self.cluster.restore_s3()
        self.cluster.stop()

    @property
    def outage(self) -> bool:
        """Remote storage is down: a reader may fail with a retriable error (never with wrong data)."""
        return self.cluster.s3_down

    def _replay(self, exc: BaseException) -> str:
        steps = "\n".join(self.history[-40:])
        return (
            f"random walk seed {self.seed} failed at step {len(self.history) - 1}: {type(exc).__name__}: {exc}\n"
            f"replay: {self.replay_variables[0]}={self.seed} {self.replay_variables[1]}={self.steps} "
            f".venv/bin/pytest {self.replay_test}\nlast steps:\n{steps}"
        )

    @property
    def table(self) -> lakelog.Table:
        assert self.conn is not None
        return self.conn.get_table(PATH)

    # steps

    def _step_produce(self) -> str:
        bucket = self.rng.randrange(BUCKETS)
        count = self.rng.choice([1, 2, 7, 50, 300, 1200])
        acks: list[lakelog.AppendAck] = []
        table = self.table
        writer = table.new_append().create_writer(on_ack=acks.append)
        ids = list(range(self.next_id, self.next_id + count))
        writer.append_arrow(self._rows(table.info.schema, ids), bucket=bucket)
        writer.close()
        assert len(acks) == 1, f"one append, {len(acks)} acknowledgements"
        self.oracle.acknowledge(acks[0], ids)
        self.next_id += count
        return f"produce {count} to bucket {bucket}"

    def _rows(self, schema: pa.Schema, ids: list[int]) -> pa.RecordBatch:
        """The rows of ``ids`` in ``schema``: the orders columns, and each added column's value."""
        rows = order_rows(ids[0], len(ids))
        for name in schema.names[len(rows.schema) :]:
            rows = rows.append_column(schema.field(name), pa.array([self.oracle.added_value(name, i) for i in ids], schema.field(name).type))
        return rows

    def _step_alter(self) -> str:
        """Add an int32 column, or widen an added one to int64; every later reader reads both."""
        schema = self.table.info.schema
        narrow = [f.name for f in schema if f.name in self.oracle.added and f.type == pa.int32()]
        if narrow and (len(self.oracle.added) >= MAX_ADDED_COLUMNS or self.rng.random() < 0.5):
            change = lakelog.TableChange.widen_column(self.rng.choice(narrow), pa.int64())
        elif len(self.oracle.added) < MAX_ADDED_COLUMNS:
            change = lakelog.TableChange.add_column(f"c{len(self.oracle.added) + 1}", pa.int32())
        else:
            return "alter: nothing left to change"
        assert self.conn is not None
        schema_id = self.conn.admin.alter_table(PATH, [change])
        if change.kind == lakelog.TableChange.ADD_COLUMN:
            self.oracle.add_column(change.name, self.next_id)
        return f"alter: {change.kind} {change.name} {change.type} (schema {schema_id})"

    def _step_roll(self) -> str:
        bucket = self.rng.randrange(BUCKETS)
        self.cluster.roll(self.table.info.table_id, bucket)
        return f"roll bucket {bucket}"

    def _step_upload(self) -> str:
        report = self.cluster.remote.run_once()
        assert self.cluster.s3_down or not report.errors, report.errors
        return f"upload ({report.uploaded} uploaded, {report.deleted_local} local deleted)"

    def _step_tier(self) -> str:
        try:
            report = self.cluster.tier_round()
        except OUTAGE_ERRORS as error:
            if not self.cluster.s3_down:
                raise
            return f"tier failed cleanly while S3 is down ({type(error).__name__})"
        assert self.cluster.s3_down or not report.failed, report.failed
        if not report.failed:
            self.coordinator_may_lag = False
        return f"tier ({report.records} records)"

    def _step_expire(self) -> str:
        return f"expire remote ({self.cluster.expire_remote()} segments)"

    def _step_compact_lake(self) -> str:
        report = self.cluster.compact_lake(PATH)
        return f"compact lake ({report.files_replaced} files into {report.files_written}, snapshot {report.snapshot_id})"

    def _step_expire_lake(self) -> str:
        report = self.cluster.expire_lake(PATH)
        return f"expire lake ({report.snapshots_expired} snapshots, {report.files_deleted} files)"

    def _step_restart_tablet(self) -> str:
        self.cluster.restart_tablet()
        return "restart tablet server"

    def _step_restart_coordinator(self) -> str:
        self.cluster.restart_coordinator()
        return "restart coordinator"

    def _step_kill_tiering(self) -> str:
        where = self.rng.choice(["after-write", "after-commit"])
        untiered = False
        # After a kill past the lake commit, the coordinator's lake end lags the lake until a round
        # catches it up: describe_buckets may then show records as untiered that the lake holds.
        if not self.cluster.s3_down and not self.coordinator_may_lag:
            assert self.conn is not None
            described = self.conn.admin.describe_buckets(PATH)
            untiered = any(self.oracle.high_watermark(b) > max(0, described[b].lake_log_end_offset) for b in range(BUCKETS))
        result = self.cluster.kill_tiering_mid_round(where)
        if untiered:
            # S3 is up and there is something to tier: the round must reach the kill point.
            assert result.returncode == -signal.SIGKILL, (
                f"kill tiering {where}: exit {result.returncode}, not SIGKILL\n{result.stderr[-3000:]}"
            )
        if where == "after-commit" and result.returncode == -signal.SIGKILL:
            self.coordinator_may_lag = True
        return f"kill tiering {where} (exit {result.returncode}{'' if untiered else ', nothing to tier or S3 down'})"

    def _step_toggle_s3(self) -> str:
        if self.cluster.s3_down:
            self.cluster.restore_s3()
            return "start S3"
        self.cluster.cut_s3()
        return "stop S3"

    def _step_damage_manifest(self) -> str:
        """Delete or garble a bucket's remote manifest, restart the tablet server (it must not trust
        or delete anything), then ``lakelog repair remote`` rebuilds the manifest from the files."""
        bucket = self.rng.randrange(BUCKETS)
        if self.cluster.s3_down or self.cluster.remote.manifest(self.table.info.table_id, bucket).end_offset <= 0:
            return f"damage manifest of bucket {bucket}: skipped (S3 down or nothing uploaded)"
        how = self.rng.choice(["deleted", "garbled"])
        self.cluster.damage_manifest(PATH, self.table.info.table_id, bucket, how)
        self.cluster.restart_tablet()
        # As an operator runs repair once the server is back: this long-lived connection's channel
        # may still be in its reconnect backoff (at most 1 s) from polls made while it was down.
        wait_until(self._tablet_answers, "the restarted tablet server answering this connection", 30)
        assert self.conn is not None
        (repair,) = self.conn.admin.repair_buckets(PATH, [bucket])
        assert repair.error is None, f"repair remote of bucket {bucket}: {repair.error}"
        return f"manifest of bucket {bucket} {how}, restart, repair remote: {repair.summary}"

    def _tablet_answers(self) -> bool:
        assert self.conn is not None
        try:
            self.conn.admin.list_offsets(PATH)
            return True
        except lakelog.NetworkError:
            return False

    def _step_damage_segment(self) -> str:
        """Damage a rolled local segment. Uploaded, it is served from remote storage, tiered from the
        lake (the checks go on as before); neither, a read of it fails naming the file until the file
        is restored."""
        bucket = self.rng.randrange(BUCKETS)
        table_id = self.table.info.table_id
        rolled = self.cluster.local_log(table_id, bucket).segments[:-1]
        if self.cluster.s3_down or not rolled:
            return f"damage a segment of bucket {bucket}: skipped (S3 down or no rolled segment)"
        segment = self.rng.choice(rolled)
        uploaded = segment.next_offset <= self.cluster.remote.manifest(table_id, bucket).end_offset
        assert self.conn is not None
        described = self.conn.admin.describe_buckets(PATH)[bucket]
        in_lake = described.lake_log_start_offset <= segment.base_offset and segment.next_offset <= described.lake_log_end_offset
        original = self.cluster.damage_segment(table_id, bucket, segment.base_offset)
        if uploaded:
            return f"damage uploaded segment {segment.base_offset} of bucket {bucket}: served from remote"
        if in_lake:
            return f"damage segment {segment.base_offset} of bucket {bucket} (not uploaded, tiered): served from the lake"
        with self.table.new_scan().create_log_scanner() as scanner:
            scanner.subscribe(bucket, segment.base_offset)
            try:
                for _ in range(20):
                    scanner.poll(timeout_ms=500)
                raise AssertionError(f"bucket {bucket}: a read of quarantined segment {segment.base_offset} raised nothing")
            except lakelog.CorruptRecordError as error:
                assert f"{segment.base_offset:020d}.log" in str(error), f"the error names no file: {error}"
        self.cluster.restore_segment(table_id, bucket, segment.base_offset, original)
        return f"damage segment {segment.base_offset} of bucket {bucket} (not uploaded): CorruptRecordError, restored"

    def _step_produce_partition(self) -> str:
        done, self.next_id = self.partitioned.produce(self.next_id)
        return done

    def _step_create_partition(self) -> str:
        return self.partitioned.create()

    def _step_drop_partition(self) -> str:
        return self.partitioned.drop()

    def _step_toggle_hostile(self) -> str:
        if self.hostile is not None:
            self.hostile.close()
            self.hostile = None
            return "hostile clients leave"
        assert self.conn is not None
        idle = self.conn.get_table(IDLE).info.table_id
        self.hostile = HostileLoad(self.cluster.tablet_address, idle, self.table.info.table_id, HOSTILE_POLLS, HOSTILE_STREAMS)
        return f"hostile clients: {HOSTILE_POLLS} idle long polls, {HOSTILE_STREAMS} never-read streams"

    # checks

    def _check(self, number: int) -> None:
        where = f"seed {self.seed} step {number}"
        self._check_log(where)
        self.partitioned.check(where)

    def _check_log(self, where: str) -> None:
        """The walk's table: offsets, a random reader, the long-lived reader."""
        self._check_offsets(where)
        self._random_reader(where)
        self._follow(where)

    def _check_offsets(self, where: str) -> None:
        assert self.conn is not None
        admin = self.conn.admin
        latest = admin.list_offsets(PATH, spec=lakelog.OffsetSpec.latest())
        assert latest == {b: self.oracle.high_watermark(b) for b in range(BUCKETS)}, f"{where}: latest {latest}"
        if self.outage:
            return
        earliest = admin.list_offsets(PATH, spec=lakelog.OffsetSpec.earliest())
        assert earliest == {b: 0 for b in range(BUCKETS)}, f"{where}: earliest {earliest} (no offset may become unreadable)"
        bucket = self.rng.randrange(BUCKETS)
        timestamp = self._random_timestamp(bucket)
        found = admin.list_offsets(PATH, [bucket], lakelog.OffsetSpec.timestamp(timestamp))[bucket]
        assert found == self.oracle.offset_for_timestamp(bucket, timestamp), (
            f"{where}: timestamp {timestamp} of bucket {bucket} -> {found}, oracle {self.oracle.offset_for_timestamp(bucket, timestamp)}"
        )

    def _random_timestamp(self, bucket: int) -> int:
        stamps = self.oracle.timestamps[bucket]
        if not stamps:
            return int(time.time() * 1000)
        pick = self.rng.choice(stamps)
        return self.rng.choice([pick - 1, pick, pick + 1, stamps[0] - 1000, stamps[-1] + 1])

    def _random_reader(self, where: str) -> None:
        bucket = self.rng.randrange(BUCKETS)
        end = self.oracle.high_watermark(bucket)
        with self.table.new_scan().create_log_scanner() as scanner:
            try:
                if self.rng.random() < 0.5:
                    start = self.rng.randint(0, end)
                    scanner.subscribe(bucket, start)
                else:
                    timestamp = self._random_timestamp(bucket)
                    scanner.subscribe_from_timestamp(timestamp, [bucket])
                    start = scanner.positions()[bucket]
                    assert start == self.oracle.offset_for_timestamp(bucket, timestamp), f"{where}: subscribe_from_timestamp"
                stop = min(end, start + READ_LIMIT)
                read = scan_all(scanner, stop - start, CATCH_UP_S).slice(0, stop - start)
            except OUTAGE_ERRORS:
                if not self.outage:
                    raise
                return
        self.oracle.check(read, bucket, start, f"{where}: reader of bucket {bucket} from {start}")

    def _new_follower(self) -> None:
        if self.follower is not None:
            self.follower.close()
        self.follower = self.table.new_scan().create_log_scanner()
        for bucket in range(BUCKETS):
            self.follower.subscribe(bucket, self.followed.get(bucket, 0))
            self.followed.setdefault(bucket, 0)

    def _follow(self, where: str) -> None:
        """The long-lived reader catches up with every bucket; records must continue exactly."""
        assert self.follower is not None
        deadline = time.monotonic() + CATCH_UP_S
        while any(self.followed[b] < self.oracle.high_watermark(b) for b in range(BUCKETS)):
            assert time.monotonic() < deadline, f"{where}: the long-lived reader is stuck at {self.followed}"
            try:
                records = self.follower.poll(timeout_ms=500)
            except OUTAGE_ERRORS:
                if self.outage:
                    return
                raise
            polled = records.to_arrow()
            for bucket in records.buckets():
                table = polled.filter(pa.compute.equal(polled.column("__bucket"), bucket))
                self.oracle.check(table, bucket, self.followed[bucket], f"{where}: long-lived reader")
                self.followed[bucket] += table.num_rows
