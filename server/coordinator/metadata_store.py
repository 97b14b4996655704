"""The coordinator's durable state in an embedded SQLite database.

SQLite gives the coordinator transactions and crash safety without another service to run; the
schema is small and every write is one transaction, synced before the call returns.
"""

from __future__ import annotations

import json
from collections import Counter
import sqlite3
import threading
import time
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from lakelog.cluster_state import BucketReplicas, ServerNode
from lakelog.metadata import (
    LakeBucketKey,
    LakeBucketOffset,
    LakeSnapshot,
    PartitionInfo,
    TableDescriptor,
    TableInfo,
    TablePath,
    TieringJobInfo,
    split_lake_bucket_key,
)
from lakelog.record.schema_bytes import schema_from_bytes, schema_to_bytes

_SCHEMA = """
CREATE TABLE IF NOT EXISTS databases (
    name TEXT PRIMARY KEY,
    comment TEXT NOT NULL DEFAULT '',
    created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tables (
    table_id INTEGER PRIMARY KEY AUTOINCREMENT,
    database TEXT NOT NULL REFERENCES databases(name),
    name TEXT NOT NULL,
    schema BLOB NOT NULL,
    schema_id INTEGER NOT NULL,
    buckets INTEGER NOT NULL,
    properties TEXT NOT NULL,
    comment TEXT NOT NULL DEFAULT '',
    created_ms INTEGER NOT NULL,
    bucket_keys TEXT NOT NULL DEFAULT '[]',
    partition_keys TEXT NOT NULL DEFAULT '[]',
    UNIQUE (database, name)
);
CREATE TABLE IF NOT EXISTS table_schemas (
    table_id INTEGER NOT NULL REFERENCES tables(table_id) ON DELETE CASCADE,
    schema_id INTEGER NOT NULL,
    schema BLOB NOT NULL,
    PRIMARY KEY (table_id, schema_id)
);
CREATE TABLE IF NOT EXISTS partitions (
    partition_id INTEGER PRIMARY KEY,
    table_id INTEGER NOT NULL REFERENCES tables(table_id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    UNIQUE (table_id, name)
);
CREATE TABLE IF NOT EXISTS partition_bucket_leaders (
    partition_id INTEGER NOT NULL REFERENCES partitions(partition_id) ON DELETE CASCADE,
    bucket INTEGER NOT NULL,
    leader_id INTEGER NOT NULL,
    PRIMARY KEY (partition_id, bucket)
);
CREATE TABLE IF NOT EXISTS tablet_servers (
    server_id INTEGER PRIMARY KEY,
    host TEXT NOT NULL,
    port INTEGER NOT NULL,
    registered_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS bucket_leaders (
    table_id INTEGER NOT NULL REFERENCES tables(table_id) ON DELETE CASCADE,
    bucket INTEGER NOT NULL,
    leader_id INTEGER NOT NULL,
    PRIMARY KEY (table_id, bucket)
);
CREATE TABLE IF NOT EXISTS lake_snapshots (
    table_id INTEGER PRIMARY KEY REFERENCES tables(table_id) ON DELETE CASCADE,
    snapshot_id INTEGER NOT NULL,
    committed_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS lake_bucket_offsets (
    table_id INTEGER NOT NULL REFERENCES tables(table_id) ON DELETE CASCADE,
    bucket INTEGER NOT NULL,
    log_start_offset INTEGER NOT NULL,
    log_end_offset INTEGER NOT NULL,
    log_max_timestamp INTEGER NOT NULL,
    PRIMARY KEY (table_id, bucket)
);
-- Partitions dropped from the log of a lake-enabled table once the lake held all of them: read
-- from the lake only; their names are not reused.
CREATE TABLE IF NOT EXISTS lake_only_partitions (
    partition_id INTEGER PRIMARY KEY,
    table_id INTEGER NOT NULL REFERENCES tables(table_id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    dropped_ms INTEGER NOT NULL
);
-- A partitioned table's lake ranges, per (partition, bucket); no reference to partitions: what the
-- lake holds of a partition outlives the partition's log.
CREATE TABLE IF NOT EXISTS lake_partition_bucket_offsets (
    table_id INTEGER NOT NULL REFERENCES tables(table_id) ON DELETE CASCADE,
    partition_id INTEGER NOT NULL,
    bucket INTEGER NOT NULL,
    log_start_offset INTEGER NOT NULL,
    log_end_offset INTEGER NOT NULL,
    log_max_timestamp INTEGER NOT NULL,
    PRIMARY KEY (table_id, partition_id, bucket)
);
CREATE TABLE IF NOT EXISTS writer_ids (
    writer_id INTEGER PRIMARY KEY AUTOINCREMENT,
    allocated_ms INTEGER NOT NULL
);
-- The copies of each bucket of a table or partition (by its physical id) kept on more than one
-- server; a bucket without a row is kept by its leader alone. Rows go with their table or
-- partition (see delete_table and delete_partition).
CREATE TABLE IF NOT EXISTS bucket_replicas (
    physical_id INTEGER NOT NULL,
    bucket INTEGER NOT NULL,
    replicas TEXT NOT NULL,
    isr TEXT NOT NULL,
    leader_epoch INTEGER NOT NULL,
    isr_version INTEGER NOT NULL,
    PRIMARY KEY (physical_id, bucket)
);
CREATE TABLE IF NOT EXISTS writer_key (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    key BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS tiering_jobs (
    job_id TEXT PRIMARY KEY,
    tables TEXT NOT NULL,
    last_barrier INTEGER NOT NULL,
    last_heartbeat_ms INTEGER NOT NULL
);
"""


class MetadataStore:
    """Databases, tables, tablet servers, bucket leaders, lake snapshots and tiering jobs; thread-safe."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(_SCHEMA)
        self._add_missing_columns()

    def _add_missing_columns(self) -> None:
        """A metadata store written before bucket and partition keys existed gains their columns."""
        have = {row[1] for row in self._db.execute("PRAGMA table_info(tables)")}
        for column in ("bucket_keys", "partition_keys"):
            if column not in have:
                self._db.execute(f"ALTER TABLE tables ADD COLUMN {column} TEXT NOT NULL DEFAULT '[]'")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _transaction(self) -> "_Transaction":
        return _Transaction(self._db, self._lock)

    # databases

    def database_exists(self, name: str) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM databases WHERE name = ?", (name,)).fetchone() is not None

    def insert_database(self, name: str, comment: str) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO databases (name, comment, created_ms) VALUES (?, ?, ?)",
                (name, comment, int(time.time() * 1000)),
            )

    def delete_database(self, name: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM databases WHERE name = ?", (name,))

    def list_databases(self) -> list[str]:
        with self._lock:
            return [row[0] for row in self._db.execute("SELECT name FROM databases ORDER BY name")]

    # tables

    def insert_table(
        self, path: TablePath, descriptor: TableDescriptor, leaders: dict[int, int], replicas: dict[int, BucketReplicas]
    ) -> TableInfo:
        created = int(time.time() * 1000)
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO tables (database, name, schema, schema_id, buckets, properties, comment, created_ms,"
                " bucket_keys, partition_keys) VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, ?)",
                (
                    path.database,
                    path.table,
                    schema_to_bytes(descriptor.schema),
                    descriptor.buckets,
                    json.dumps(dict(descriptor.properties), sort_keys=True),
                    descriptor.comment,
                    created,
                    json.dumps(list(descriptor.bucket_keys)),
                    json.dumps(list(descriptor.partition_keys)),
                ),
            )
            table_id = int(cursor.lastrowid or 0)
            db.execute(
                "INSERT INTO table_schemas (table_id, schema_id, schema) VALUES (?, 1, ?)",
                (table_id, schema_to_bytes(descriptor.schema)),
            )
            db.executemany(
                "INSERT INTO bucket_leaders (table_id, bucket, leader_id) VALUES (?, ?, ?)",
                [(table_id, bucket, leader) for bucket, leader in leaders.items()],
            )
            _insert_replicas(db, table_id, replicas)
        return TableInfo(
            table_id,
            path,
            descriptor.schema,
            1,
            descriptor.buckets,
            dict(descriptor.properties),
            descriptor.comment,
            created,
            tuple(descriptor.bucket_keys),
            tuple(descriptor.partition_keys),
        )

    def alter_schema(self, table_id: int, schema: pa.Schema) -> int:
        """Make ``schema`` the table's next version, in one transaction with the version history
        (a table created before histories were kept gets its current version recorded first); the
        new version's id."""
        with self._transaction() as db:
            current, current_id = db.execute("SELECT schema, schema_id FROM tables WHERE table_id = ?", (table_id,)).fetchone()
            db.execute(
                "INSERT OR IGNORE INTO table_schemas (table_id, schema_id, schema) VALUES (?, ?, ?)", (table_id, current_id, current)
            )
            new_id = current_id + 1
            encoded = schema_to_bytes(schema)
            db.execute("UPDATE tables SET schema = ?, schema_id = ? WHERE table_id = ?", (encoded, new_id, table_id))
            db.execute("INSERT INTO table_schemas (table_id, schema_id, schema) VALUES (?, ?, ?)", (table_id, new_id, encoded))
        return new_id

    def table_schema(self, table_id: int, schema_id: int) -> pa.Schema | None:
        """Version ``schema_id`` of the table's schema, None if it has none of that id."""
        with self._lock:
            row = self._db.execute(
                "SELECT schema FROM table_schemas WHERE table_id = ? AND schema_id = ?"
                " UNION ALL SELECT schema FROM tables WHERE table_id = ? AND schema_id = ?",
                (table_id, schema_id, table_id, schema_id),
            ).fetchone()
        return None if row is None else schema_from_bytes(row[0])

    def delete_table(self, table_id: int) -> None:
        with self._transaction() as db:
            db.execute(
                "DELETE FROM bucket_replicas WHERE physical_id = ? OR physical_id IN"
                " (SELECT partition_id FROM partitions WHERE table_id = ?)",
                (table_id, table_id),
            )
            db.execute("DELETE FROM tables WHERE table_id = ?", (table_id,))

    def table_count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM tables").fetchone()[0])

    def table_by_path(self, path: TablePath) -> TableInfo | None:
        return self._one_table("database = ? AND name = ?", (path.database, path.table))

    def table_by_id(self, table_id: int) -> TableInfo | None:
        return self._one_table("table_id = ?", (table_id,))

    def tables_in(self, database: str) -> list[TableInfo]:
        return list(self._tables("database = ? ORDER BY name", (database,)))

    def all_tables(self) -> list[TableInfo]:
        return list(self._tables("1 = 1 ORDER BY table_id", ()))

    def _one_table(self, where: str, args: tuple) -> TableInfo | None:
        return next(self._tables(where, args), None)

    def _tables(self, where: str, args: tuple) -> Iterator[TableInfo]:
        with self._lock:
            rows = self._db.execute(
                "SELECT table_id, database, name, schema, schema_id, buckets, properties, comment, created_ms,"
                f" bucket_keys, partition_keys FROM tables WHERE {where}",
                args,
            ).fetchall()
        for table_id, database, name, schema, schema_id, buckets, properties, comment, created, bucket_keys, partition_keys in rows:
            yield TableInfo(
                table_id,
                TablePath(database, name),
                schema_from_bytes(schema),
                schema_id,
                buckets,
                json.loads(properties),
                comment,
                created,
                tuple(json.loads(bucket_keys)),
                tuple(json.loads(partition_keys)),
            )

    def leaders(self, table_id: int) -> dict[int, int]:
        with self._lock:
            rows = self._db.execute(
                "SELECT bucket, leader_id FROM bucket_leaders WHERE table_id = ? ORDER BY bucket", (table_id,)
            ).fetchall()
        return {bucket: leader for bucket, leader in rows}

    # partitions: their ids come from the tables' AUTOINCREMENT sequence, which SQLite never hands
    # out twice (even after a drop), so a partition id names no table and is never reused.

    def insert_partition(self, table_id: int, name: str, leaders: dict[int, int], replicas: dict[int, BucketReplicas]) -> PartitionInfo:
        with self._transaction() as db:
            db.execute("UPDATE sqlite_sequence SET seq = seq + 1 WHERE name = 'tables'")
            partition_id = int(db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'tables'").fetchone()[0])
            db.execute(
                "INSERT INTO partitions (partition_id, table_id, name, created_ms) VALUES (?, ?, ?, ?)",
                (partition_id, table_id, name, int(time.time() * 1000)),
            )
            db.executemany(
                "INSERT INTO partition_bucket_leaders (partition_id, bucket, leader_id) VALUES (?, ?, ?)",
                [(partition_id, bucket, leader) for bucket, leader in leaders.items()],
            )
            _insert_replicas(db, partition_id, replicas)
        return PartitionInfo(partition_id, name)

    def delete_partition(self, partition_id: int, lake_only: bool = False) -> None:
        """Forget the partition's log; with ``lake_only`` it is kept as a partition the lake holds."""
        with self._transaction() as db:
            if lake_only:
                db.execute(
                    "INSERT INTO lake_only_partitions (partition_id, table_id, name, dropped_ms)"
                    " SELECT partition_id, table_id, name, ? FROM partitions WHERE partition_id = ?",
                    (int(time.time() * 1000), partition_id),
                )
            db.execute("DELETE FROM bucket_replicas WHERE physical_id = ?", (partition_id,))
            db.execute("DELETE FROM partitions WHERE partition_id = ?", (partition_id,))

    def lake_only_partitions(self, table_id: int) -> list[PartitionInfo]:
        with self._lock:
            rows = self._db.execute(
                "SELECT partition_id, name FROM lake_only_partitions WHERE table_id = ? ORDER BY partition_id", (table_id,)
            ).fetchall()
        return [PartitionInfo(partition_id, name, lake_only=True) for partition_id, name in rows]

    def partitions(self, table_id: int) -> list[PartitionInfo]:
        with self._lock:
            rows = self._db.execute(
                "SELECT partition_id, name FROM partitions WHERE table_id = ? ORDER BY partition_id", (table_id,)
            ).fetchall()
        return [PartitionInfo(partition_id, name) for partition_id, name in rows]

    def partition_by_id(self, partition_id: int) -> tuple[int, PartitionInfo] | None:
        """The table id and the partition, for a partition id."""
        with self._lock:
            row = self._db.execute("SELECT table_id, name FROM partitions WHERE partition_id = ?", (partition_id,)).fetchone()
        return None if row is None else (row[0], PartitionInfo(partition_id, row[1]))

    def partition_count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM partitions").fetchone()[0])

    def buckets_per_server(self) -> dict[int, int]:
        """Per tablet server id, how many bucket copies of tables and partitions it keeps: every
        replica of a replicated bucket, the leader of any other."""
        with self._lock:
            led = self._db.execute(
                "SELECT leader_id, COUNT(*) FROM ("
                " SELECT table_id AS physical_id, bucket, leader_id FROM bucket_leaders"
                " UNION ALL SELECT partition_id, bucket, leader_id FROM partition_bucket_leaders) AS l"
                " WHERE NOT EXISTS (SELECT 1 FROM bucket_replicas r WHERE r.physical_id = l.physical_id AND r.bucket = l.bucket)"
                " GROUP BY leader_id"
            ).fetchall()
            copies = self._db.execute("SELECT replicas FROM bucket_replicas").fetchall()
        kept = Counter({leader: count for leader, count in led})
        kept.update(server for (replicas,) in copies for server in json.loads(replicas))
        return dict(kept)

    def partition_leaders(self, table_id: int) -> dict[int, dict[int, int]]:
        """Per partition of the table, per bucket, its leader's id."""
        with self._lock:
            rows = self._db.execute(
                "SELECT l.partition_id, l.bucket, l.leader_id FROM partition_bucket_leaders l"
                " JOIN partitions p ON p.partition_id = l.partition_id WHERE p.table_id = ? ORDER BY l.partition_id, l.bucket",
                (table_id,),
            ).fetchall()
        leaders: dict[int, dict[int, int]] = {}
        for partition_id, bucket, leader in rows:
            leaders.setdefault(partition_id, {})[bucket] = leader
        return leaders

    # replicas

    def bucket_replicas(self, physical_id: int) -> dict[int, BucketReplicas]:
        """Per bucket of the table or partition kept on more than one server, its copies."""
        with self._lock:
            rows = self._db.execute(
                "SELECT bucket, replicas, isr, leader_epoch, isr_version FROM bucket_replicas WHERE physical_id = ? ORDER BY bucket",
                (physical_id,),
            ).fetchall()
        return {
            bucket: BucketReplicas(tuple(json.loads(replicas)), tuple(json.loads(isr)), epoch, version)
            for bucket, replicas, isr, epoch, version in rows
        }

    def update_bucket(self, physical_id: int, bucket: int, leader: int, replicas: BucketReplicas) -> None:
        """Store a bucket's new leader and copies in one transaction (an election, an ISR change)."""
        with self._transaction() as db:
            db.execute("UPDATE bucket_leaders SET leader_id = ? WHERE table_id = ? AND bucket = ?", (leader, physical_id, bucket))
            db.execute(
                "UPDATE partition_bucket_leaders SET leader_id = ? WHERE partition_id = ? AND bucket = ?", (leader, physical_id, bucket)
            )
            _insert_replicas(db, physical_id, {bucket: replicas})

    # lake snapshots

    def put_lake_snapshot(self, table_id: int, snapshot: LakeSnapshot) -> None:
        """Record a committed lake snapshot; buckets it does not mention keep their offsets."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO lake_snapshots (table_id, snapshot_id, committed_ms) VALUES (?, ?, ?)"
                " ON CONFLICT(table_id) DO UPDATE SET snapshot_id = excluded.snapshot_id,"
                " committed_ms = excluded.committed_ms",
                (table_id, snapshot.snapshot_id, int(time.time() * 1000)),
            )
            ranges = (
                " log_start_offset = excluded.log_start_offset, log_end_offset = excluded.log_end_offset,"
                " log_max_timestamp = excluded.log_max_timestamp"
            )
            buckets = [(split_lake_bucket_key(key), o) for key, o in snapshot.bucket_offsets.items()]
            db.executemany(
                "INSERT INTO lake_bucket_offsets (table_id, bucket, log_start_offset, log_end_offset, log_max_timestamp)"
                f" VALUES (?, ?, ?, ?, ?) ON CONFLICT(table_id, bucket) DO UPDATE SET{ranges}",
                [(table_id, bucket, o.log_start_offset, o.log_end_offset, o.log_max_timestamp) for (pid, bucket), o in buckets if pid is None],
            )
            db.executemany(
                "INSERT INTO lake_partition_bucket_offsets (table_id, partition_id, bucket, log_start_offset, log_end_offset,"
                f" log_max_timestamp) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(table_id, partition_id, bucket) DO UPDATE SET{ranges}",
                [
                    (table_id, pid, bucket, o.log_start_offset, o.log_end_offset, o.log_max_timestamp)
                    for (pid, bucket), o in buckets
                    if pid is not None
                ],
            )

    def lake_snapshot(self, table_id: int) -> LakeSnapshot | None:
        with self._lock:
            row = self._db.execute("SELECT snapshot_id FROM lake_snapshots WHERE table_id = ?", (table_id,)).fetchone()
            if row is None:
                return None
            buckets = self._db.execute(
                "SELECT bucket, log_start_offset, log_end_offset, log_max_timestamp FROM lake_bucket_offsets"
                " WHERE table_id = ? ORDER BY bucket",
                (table_id,),
            ).fetchall()
            partitions = self._db.execute(
                "SELECT partition_id, bucket, log_start_offset, log_end_offset, log_max_timestamp FROM lake_partition_bucket_offsets"
                " WHERE table_id = ? ORDER BY partition_id, bucket",
                (table_id,),
            ).fetchall()
        offsets: dict[LakeBucketKey, LakeBucketOffset] = {bucket: LakeBucketOffset(*o) for bucket, *o in buckets}
        offsets.update({(pid, bucket): LakeBucketOffset(*o) for pid, bucket, *o in partitions})
        return LakeSnapshot(row[0], offsets)

    # tablet servers

    def upsert_tablet_server(self, node: ServerNode) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO tablet_servers (server_id, host, port, registered_ms) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(server_id) DO UPDATE SET host = excluded.host, port = excluded.port,"
                " registered_ms = excluded.registered_ms",
                (node.server_id, node.host, node.port, int(time.time() * 1000)),
            )

    def tablet_servers(self) -> list[ServerNode]:
        with self._lock:
            rows = self._db.execute("SELECT server_id, host, port FROM tablet_servers ORDER BY server_id").fetchall()
        return [ServerNode(*row) for row in rows]

    # tiering jobs

    def allocate_writer_id(self) -> int:
        """A writer id never returned before, even across restarts (AUTOINCREMENT never reuses a
        row id); only the newest row is kept, which is all AUTOINCREMENT needs."""
        with self._transaction() as db:
            writer_id = int(db.execute("INSERT INTO writer_ids (allocated_ms) VALUES (?)", (int(time.time() * 1000),)).lastrowid)
            db.execute("DELETE FROM writer_ids WHERE writer_id < ?", (writer_id,))
        return writer_id

    def writer_key(self, new_key: bytes) -> bytes:
        """The key writer tokens are made with: ``new_key`` stored on first use, the stored one
        ever after, so tokens issued before a restart still check."""
        with self._transaction() as db:
            db.execute("INSERT OR IGNORE INTO writer_key (id, key) VALUES (0, ?)", (new_key,))
            return bytes(db.execute("SELECT key FROM writer_key WHERE id = 0").fetchone()[0])

    def upsert_tiering_job(self, job: TieringJobInfo) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO tiering_jobs (job_id, tables, last_barrier, last_heartbeat_ms) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(job_id) DO UPDATE SET tables = excluded.tables, last_barrier = excluded.last_barrier,"
                " last_heartbeat_ms = excluded.last_heartbeat_ms",
                (job.job_id, json.dumps([str(path) for path in job.tables]), job.last_barrier, job.last_heartbeat_ms),
            )

    def tiering_jobs(self) -> list[TieringJobInfo]:
        with self._lock:
            rows = self._db.execute(
                "SELECT job_id, tables, last_barrier, last_heartbeat_ms FROM tiering_jobs ORDER BY last_heartbeat_ms"
            ).fetchall()
        return [
            TieringJobInfo(job_id, tuple(TablePath.parse(text) for text in json.loads(tables)), barrier, heartbeat)
            for job_id, tables, barrier, heartbeat in rows
        ]


def _insert_replicas(db: sqlite3.Connection, physical_id: int, replicas: dict[int, BucketReplicas]) -> None:
    db.executemany(
        "INSERT OR REPLACE INTO bucket_replicas (physical_id, bucket, replicas, isr, leader_epoch, isr_version) VALUES (?, ?, ?, ?, ?, ?)",
        [
            (physical_id, bucket, json.dumps(list(r.replicas)), json.dumps(list(r.isr)), r.leader_epoch, r.isr_version)
            for bucket, r in replicas.items()
        ],
    )


class _Transaction:
    """``with store._transaction() as db:`` — one immediate transaction under the store lock."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock) -> None:
        self._db = db
        self._lock = lock

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        self._db.execute("BEGIN IMMEDIATE")
        return self._db

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self._db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self._lock.release()
