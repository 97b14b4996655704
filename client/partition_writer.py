"""The writer of a partitioned table: each row goes to its partition by its partition key values.

Each partition is a set of buckets of its own; all of them are written by one :class:`AppendWriter`
(one accumulator, whose buckets are keyed by partition too), so batching, ordering and retries are
those of a table, the connection's sender carries many partitions' batches in one request, and the
writer's threads do not grow with its partitions. A row for a partition that does not exist
creates it when ``client.writer.dynamic-create-partition.enabled`` (the default), else raises
:class:`PartitionNotExistError`. Arrow input is checked whole before any row is written: a bad or
missing partition value anywhere writes nothing.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.config import Configuration
from lakelog.errors import InvalidPartitionError, PartitionNotExistError
from lakelog.metadata import PARTITION_NAME_SEPARATOR, TableInfo, partition_name, partition_spec
from lakelog.client.admin import Admin
from lakelog.client.arrow_input import arrow_table
from lakelog.client.bucket_assigner import split_rows
from lakelog.client.metadata_cache import MetadataCache
from lakelog.client.delivery import DeliveryStats
from lakelog.client.writer import AppendWriter


@dataclass
class _Pending:
    """Arrow rows handed in and not split yet, each row's partition as an index into the writer's
    partitions; ``since`` is when the oldest of them arrived (monotonic seconds)."""

    since: float = 0.0
    tables: list[pa.Table] = field(default_factory=list)
    codes: list[pa.Array] = field(default_factory=list)
    partitions: set[int] = field(default_factory=set)
    size: int = 0


class PartitionedAppendWriter:
    """The same methods as :class:`AppendWriter`, over a partitioned table's partitions."""

    def __init__(
        self,
        info: TableInfo,
        new_writer: Callable[[Callable[[float], float]], AppendWriter],
        admin: Admin,
        metadata: MetadataCache,
        conf: Configuration,
    ) -> None:
        """``new_writer(linger_first)``: the AppendWriter that writes every partition, which calls
        ``linger_first`` on the sender's thread before it seals lingering rows."""
        self._info = info
        self._admin = admin
        self._metadata = metadata
        self._create = conf.get("client.writer.dynamic-create-partition.enabled")
        self._partitions: dict[str, TableInfo] = {}
        self._lock = threading.Lock()
        # Arrow input is held whole (no copy) until the partitions it holds could fill a batch
        # each, or for ``client.writer.linger``; then all of it is split by partition at once, one
        # sort and one copy, and each partition's rows go to its writer as one batch-sized piece.
        # Splitting each input as it comes would cost a sort and a copy per input and a second copy
        # to join a partition's pieces, more work the more partitions an input spans.
        self._batch_bytes = conf.get("client.writer.batch-size")
        self._linger_s = conf.get("client.writer.linger") / 1000
        self._indexes: dict[str, int] = {}
        self._names: list[str] = []
        self._known_names: pa.Array | None = None  # ``_names`` as Arrow, for looking rows' names up
        self._pending = _Pending()
        self._pending_lock = threading.Lock()
        self._drain_lock = threading.Lock()
        self._error: Exception | None = None
        self._writer = new_writer(self._linger_pending)

    def append(self, row: Mapping[str, Any], bucket: int | None = None) -> None:
        """Append one row to its partition (see :meth:`AppendWriter.append`); Arrow rows handed in
        before it are sent first."""
        partition = self.partition_info(self.row_partition(row))
        self._raise_error()
        with self._drain_lock, self._dropped_partitions_forgotten():
            self._drain_locked()
            self._writer.append_row_to(partition, row, bucket)
        self._writer.serve_acks()
    def append_arrow(self, data: Any, bucket: int | None = None) -> None:
        """Append Arrow data (see :meth:`AppendWriter.append_arrow`), split by partition; every
        partition value is checked, and missing partitions created, before anything is written."""
        table = arrow_table(data, self._info.schema, str(self._info.path))
        if table.num_rows == 0:
            return
        codes, indexes = self._partition_codes(self._row_names(table).combine_chunks())
        self._raise_error()
        if bucket is not None:  # pinned: sent as given, after what was handed in before it
            with self._drain_lock:
                self._drain_locked()
                self._split_to_partitions([table], [codes], set(indexes), bucket)
            self._writer.serve_acks()
            return
        with self._pending_lock:
            pending = self._pending
            first = not pending.tables
            if first:
                pending.since = time.monotonic()
            pending.tables.append(table)
            pending.codes.append(codes)
            pending.partitions.update(indexes)
            pending.size += table.nbytes
            full = pending.size >= self._batch_bytes * len(pending.partitions)
        if full:
            self._drain()
        elif first:
            self._writer.send_soon()  # the sender learns when these rows' linger ends
        self._writer.serve_acks()

    def flush(self) -> None:
        """Send what was handed in and wait until every partition's rows are acknowledged; raise the first failure."""
        self.send_all()
        with self._dropped_partitions_forgotten():
            self._writer.flush()

    def send_all(self) -> None:
        """A flush's start: what was handed in goes to the writer (a failure to split it is raised)."""
        self._drain()
        self._raise_error()

    @property
    def info(self) -> TableInfo:
        return self._info

    @property
    def writer(self) -> AppendWriter:
        """The writer of every partition's buckets."""
        return self._writer

    def close(self) -> None:
        try:
            self._drain()
        finally:
            self._writer.close()

    @property
    def delivery_stats(self) -> DeliveryStats:
        """Requests and batches resent, and batches given up on, so far (every partition's)."""
        return self._writer.delivery_stats

    @contextmanager
    def _dropped_partitions_forgotten(self) -> Iterator[None]:
        """Rows failed for a partition dropped meanwhile (``PartitionNotExistError``, raised on):
        the partitions are looked up again by the next rows, so those of a name dropped and
        created again go to the new partition, and a name dropped for good creates it again (if
        allowed) or fails by name."""
        try:
            yield
        except PartitionNotExistError:
            with self._lock:
                self._partitions.clear()
            raise

    def _drain(self) -> None:
        with self._drain_lock:
            self._drain_locked()

    def _drain_locked(self) -> None:
        """Split what is pending and hand each partition's rows to its writer; one drain at a time
        (the caller holds ``_drain_lock``), so rows handed in later never overtake earlier ones."""
        with self._pending_lock:
            pending, self._pending = self._pending, _Pending()
        if pending.tables:
            self._split_to_partitions(pending.tables, pending.codes, pending.partitions)

    def _split_to_partitions(
        self, tables: list[pa.Table], codes: list[pa.Array], partitions: set[int], bucket: int | None = None, wait: bool = True
    ) -> None:
        """Each partition's rows of ``tables`` (``codes``: each row's partition) to the writer, as
        one contiguous table per partition: the writer seals each chunk it is given as a batch."""
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        if len(partitions) == 1:
            pieces = [(next(iter(partitions)), table.combine_chunks())]
        else:
            # The key columns hold one value per partition: left out of the sort's copy (half its
            # cost with one string key) and put back as constants.
            rest = table.drop_columns(self._info.partition_keys)
            split = split_rows(rest, codes[0] if len(codes) == 1 else pa.chunked_array(codes).combine_chunks())
            pieces = [(index, self._with_keys(rows, self._names[index])) for index, rows in split]
        with self._dropped_partitions_forgotten():
            for index, rows in pieces:
                self._writer.append_table_to(self.partition_info(self._names[index]), rows, bucket, wait)

    def _with_keys(self, rows: pa.Table, name: str) -> pa.Table:
        """``rows`` of partition ``name`` with its key columns back in their places of the schema."""
        schema = self._info.schema
        spec = partition_spec(self._info.partition_keys, name)
        for key in sorted(spec, key=schema.get_field_index):  # leftmost first, so each lands at its index
            field = schema.field(key)
            rows = rows.add_column(schema.get_field_index(key), field, pa.repeat(pa.scalar(spec[key], field.type), rows.num_rows))
        return rows

    def _linger_pending(self, now: float) -> float:
        """On the sender's thread: split what waited ``client.writer.linger``, without waiting for
        room (the sender makes it) nor for a drain the application runs (it sends the same rows);
        when the next will have waited. A failure is raised by the next call."""
        with self._pending_lock:
            if not self._pending.tables:
                return float("inf")
            due_at = self._pending.since + self._linger_s
        if due_at > now or not self._drain_lock.acquire(blocking=False):
            return due_at
        try:
            with self._pending_lock:
                pending, self._pending = self._pending, _Pending()
            if pending.tables:
                self._split_to_partitions(pending.tables, pending.codes, pending.partitions, wait=False)
        except Exception as error:  # noqa: BLE001 - handed to the caller's next append or flush
            self._error = self._error or error
        finally:
            self._drain_lock.release()
        return float("inf")

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def __enter__(self) -> "PartitionedAppendWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _row_names(self, table: pa.Table) -> pa.ChunkedArray:
        """Each row's partition name: its key values joined by ``$``; a null key value is refused."""
        for key in self._info.partition_keys:
            nulls = table.column(key).null_count
            if nulls:
                raise InvalidPartitionError(f"{self._info.path}: {nulls} row(s) have no value for partition key {key!r}")
        columns = [table.column(key) for key in self._info.partition_keys]
        if len(columns) == 1:
            return columns[0]
        return pc.binary_join_element_wise(*columns, PARTITION_NAME_SEPARATOR)

    def _check_name(self, name: str) -> None:
        values = name.split(PARTITION_NAME_SEPARATOR)
        if len(values) != len(self._info.partition_keys):  # a value held the separator
            raise InvalidPartitionError(f"{self._info.path}: partition values {name!r} may not contain {PARTITION_NAME_SEPARATOR!r}")
        partition_name(self._info.partition_keys, dict(zip(self._info.partition_keys, values)))

    def unknown_partitions(self, table: pa.Table) -> list[str]:
        """The partitions ``table``'s rows go to that this writer has not looked up yet."""
        names = pc.unique(self._row_names(table).combine_chunks()).to_pylist()
        with self._lock:
            return [name for name in names if name not in self._partitions]

    def row_partition(self, row: Mapping[str, Any]) -> str:
        """The name of the partition ``row`` goes to."""
        return partition_name(self._info.partition_keys, {key: row.get(key) for key in self._info.partition_keys})

    def partition_info(self, name: str) -> TableInfo:
        """The partition ``name``'s info, looked up (or created) on first use."""
        with self._lock:
            partition = self._partitions.get(name)
            if partition is None:
                partition = self._partitions[name] = self._partition(name)
            return partition

    def _partition_codes(self, names: pa.Array) -> tuple[pa.Array, list[int]]:
        """Each row's partition as its index among this writer's partitions, and the indexes that
        occur. Rows of partitions written before are looked up by name; a name not seen yet is
        checked, and its partition looked up (or created), first."""
        known = self._known_names
        if known is not None:
            codes = pc.index_in(names, value_set=known)
            if not codes.null_count:
                return codes, pc.unique(codes).to_pylist()
        encoded = names.dictionary_encode()  # each name once, checked and mapped on
        distinct = encoded.dictionary.to_pylist()
        for name in distinct:
            if name not in self._partitions:  # a partition's name was checked when it was looked up
                self._check_name(name)
        indexes = [self._index(name) for name in distinct]
        return pc.take(pa.array(indexes, pa.int32()), encoded.indices), indexes

    def _index(self, name: str) -> int:
        """The partition's index among this writer's, the partition looked up (or created) first."""
        self.partition_info(name)
        with self._lock:
            if name not in self._indexes:
                self._indexes[name] = len(self._names)
                self._names.append(name)
                self._known_names = pa.array(self._names, pa.string())
            return self._indexes[name]

    def _partition(self, name: str) -> TableInfo:
        """The partition named ``name``, created if missing and allowed. The partitions are looked
        up fresh by a writer's first row (a cached one may have been dropped and created again
        since), and again for a name not found."""
        known = self._metadata.partitions(self._info, refresh=not self._partitions)
        if name not in known:
            known = self._metadata.partitions(self._info, refresh=True)
        if name in known:
            return known[name]
        if not self._create:
            raise PartitionNotExistError(
                f"{self._info.path} has no partition {name!r} and client.writer.dynamic-create-partition.enabled is false"
            )
        spec = dict(zip(self._info.partition_keys, name.split(PARTITION_NAME_SEPARATOR)))
        self._admin.create_partition(self._info.path, spec, ignore_if_exists=True)
        known = self._metadata.partitions(self._info, refresh=True)
        if name not in known:
            raise PartitionNotExistError(f"{self._info.path}: partition {name!r} was created but dropped at once")
        return known[name]

