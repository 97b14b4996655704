"""The writer of a partitioned table: each row goes to its partition by its partition key values.

Each partition is a set of buckets of its own, written by an :class:`AppendWriter` of its own
(created on the first row for it), so batching, ordering and retries are those of a table. A row
for a partition that does not exist creates it when ``client.writer.dynamic-create-partition.
enabled`` (the default), else raises :class:`PartitionNotExistError`. Arrow input is checked whole
before any row is written: a bad or missing partition value anywhere writes nothing.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.config import Configuration
from lakelog.errors import InvalidPartitionError, PartitionNotExistError
from lakelog.metadata import PARTITION_NAME_SEPARATOR, TableInfo, partition_name
from lakelog.client.admin import Admin
from lakelog.client.arrow_input import arrow_table
from lakelog.client.bucket_assigner import split_rows
from lakelog.client.metadata_cache import MetadataCache
from lakelog.client.writer import AppendWriter


@dataclass
class _Gathered:
    """Arrow rows of one partition not sent yet, since ``since`` (monotonic seconds)."""

    since: float
    tables: list[pa.Table] = field(default_factory=list)
    size: int = 0


class PartitionedAppendWriter:
    """The same methods as :class:`AppendWriter`, over a partitioned table's partitions."""

    def __init__(
        self,
        info: TableInfo,
        new_writer: Callable[[TableInfo], AppendWriter],
        admin: Admin,
        metadata: MetadataCache,
        conf: Configuration,
    ) -> None:
        """``new_writer(partition_info)``: the AppendWriter of one partition."""
        self._info = info
        self._new_writer = new_writer
        self._admin = admin
        self._metadata = metadata
        self._create = conf.get("client.writer.dynamic-create-partition.enabled")
        self._writers: dict[str, AppendWriter] = {}
        self._lock = threading.Lock()
        # Arrow input split by partition is gathered per partition up to a batch (or linger), so a
        # table with many partitions is sent in batches as large as an unpartitioned table's.
        self._batch_bytes = conf.get("client.writer.batch-size")
        self._linger_s = conf.get("client.writer.linger") / 1000
        self._gathered: dict[str, _Gathered] = {}
        self._gather_lock = threading.Lock()
        self._send_lock = threading.RLock()
        self._error: Exception | None = None
        self._closed = threading.Event()
        self._linger = threading.Thread(target=self._linger_loop, name="partition-writer-linger", daemon=True)
        self._linger.start()

    def append(self, row: Mapping[str, Any], bucket: int | None = None) -> None:
        """Append one row to its partition (see :meth:`AppendWriter.append`)."""
        name = partition_name(self._info.partition_keys, {key: row.get(key) for key in self._info.partition_keys})
        writer = self._writer(name)
        self._raise_error()
        with self._send_lock:
            self._send(name)  # Arrow rows gathered before this row go first
            writer.append(row, bucket)

    def append_arrow(self, data: Any, bucket: int | None = None) -> None:
        """Append Arrow data (see :meth:`AppendWriter.append_arrow`), split by partition; every
        partition value is checked, and missing partitions created, before anything is written."""
        table = arrow_table(data, self._info.schema, str(self._info.path))
        if table.num_rows == 0:
            return
        names = self._row_names(table).combine_chunks().dictionary_encode()  # each name once, checked and split on
        distinct = names.dictionary.to_pylist()
        for name in distinct:
            if name not in self._writers:  # a partition's name was checked when its writer was made
                self._check_name(name)
        writers = {name: self._writer(name) for name in distinct}
        self._raise_error()
        row_bytes = table.nbytes / table.num_rows  # a slice's own nbytes costs more than the split
        for name, rows in split_rows(table, names) if len(distinct) > 1 else [(distinct[0], table)]:
            writer = writers[name]
            if bucket is not None:  # pinned: sent as given, after what was gathered before it
                with self._send_lock:
                    self._send(name)
                    writer.append_arrow(rows, bucket)
                continue
            with self._gather_lock:
                gathered = self._gathered.setdefault(name, _Gathered(time.monotonic()))
                gathered.tables.append(rows)
                gathered.size += int(rows.num_rows * row_bytes)
                full = gathered.size >= self._batch_bytes
            if full:
                self._send(name)

    def flush(self) -> None:
        """Send what was gathered, flush every partition's writer; raise the first failure."""
        self._send_all()
        self._raise_error()
        self._each(AppendWriter.flush)

    def close(self) -> None:
        try:
            self._send_all()
        finally:
            self._closed.set()
            self._linger.join()
            self._each(AppendWriter.close)

    def _send(self, name: str) -> None:
        """Hand the partition's gathered rows to its writer; one send at a time, so rows gathered
        later (or a row appended after them) never overtake them."""
        with self._send_lock:
            with self._gather_lock:
                gathered = self._gathered.pop(name, None)
            if gathered is not None:
                self._writers[name].append_arrow(pa.concat_tables(gathered.tables).combine_chunks())

    def _send_all(self, older_than: float | None = None) -> None:
        with self._gather_lock:
            names = [n for n, g in self._gathered.items() if older_than is None or g.since <= older_than]
        for name in names:
            self._send(name)

    def _linger_loop(self) -> None:
        """Sends what waited ``client.writer.linger``; a failure is raised by the next call."""
        while not self._closed.wait(self._linger_s):
            try:
                self._send_all(older_than=time.monotonic() - self._linger_s)
            except Exception as error:  # noqa: BLE001 - handed to the caller's next append or flush
                self._error = self._error or error

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def __enter__(self) -> "PartitionedAppendWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _each(self, action: Callable[[AppendWriter], None]) -> None:
        with self._lock:
            writers = list(self._writers.values())
        first: Exception | None = None
        for writer in writers:
            try:
                action(writer)
            except Exception as error:  # noqa: BLE001 - every writer gets its turn; the first failure is raised after
                first = first or error
        if first is not None:
            raise first

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

    def _writer(self, name: str) -> AppendWriter:
        with self._lock:
            writer = self._writers.get(name)
            if writer is not None:
                return writer
            partition = self._partition(name)
            writer = self._writers[name] = self._new_writer(partition)
            return writer

    def _partition(self, name: str) -> TableInfo:
        """The partition named ``name``, created if missing and allowed. The partitions are looked
        up fresh by a writer's first row (a cached one may have been dropped and created again
        since), and again for a name not found."""
        known = self._metadata.partitions(self._info, refresh=not self._writers)
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

