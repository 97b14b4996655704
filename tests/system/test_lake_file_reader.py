"""The iceberg-arrow file reader on real Parquet files: row groups read in parallel come back in
file and offset order, cut exactly at each file's range, cast into the log's schema."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO

from lakelog.config import Configuration
from lakelog.errors import LakeDataError
from lakelog.lake.iceberg_arrow_log_source import IcebergArrowLogSource
from lakelog.lake.iceberg_file_reader import FileRange, read_lake_file, read_lake_files
from lakelog.lake import spark_file_task
from lakelog.lake.fetched_row_groups import FilePieces, decode_fetched
from lakelog.lake.spark_file_task import DAMAGED_GROUP, FOOTER_GROUP, PIECE_BYTES, FilePart, LakeRead, fetch_parts_in_task, plan_parts
from lakelog.lake_config import LakeConfig
from lakelog.metadata import TableInfo, TablePath
from lakelog.record.meta_columns import with_meta_fields
from tests.harness.lake_files import lake_file

LOG_SCHEMA = with_meta_fields(pa.schema([("id", pa.int32())]))
ROWS_PER_FILE = 1000


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    return [lake_file(tmp_path / f"{n}.parquet", n * ROWS_PER_FILE, ROWS_PER_FILE, 128) for n in range(4)]


@pytest.mark.parametrize("workers", [1, 3])
def test_row_groups_read_in_parallel_come_back_in_order_within_each_range(files: list[str], workers: int) -> None:
    ranges = [FileRange(files[0], 130, 1000), FileRange(files[1], 1000, 2000), FileRange(files[2], 2000, 2501)]
    batches = list(read_lake_files(PyArrowFileIO(), ranges, LOG_SCHEMA, 100, workers))
    table = pa.Table.from_batches(batches, schema=LOG_SCHEMA)
    assert table.column("__offset").to_pylist() == list(range(130, 2501))
    assert table.column("id").to_pylist() == list(range(130, 2501))
    assert table.column("__timestamp").to_pylist() == list(range(130, 2501))
    assert max(batch.num_rows for batch in batches) <= 100


class CountingFileIO(PyArrowFileIO):
    """The real local FileIO, counting the files it opens (the per-file cost of a read)."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[str] = []

    def new_input(self, location: str) -> Any:
        self.opened.append(location)
        return super().new_input(location)


def test_small_files_are_read_whole_once_each_and_ahead_of_the_consumer(tmp_path: Path) -> None:
    paths = [lake_file(tmp_path / f"small-{n}.parquet", n * 50, 50, 16) for n in range(40)]
    sizes = [Path(path).stat().st_size for path in paths]
    ranges = [FileRange(path, n * 50 + (7 if n == 0 else 0), n * 50 + 50, size) for n, (path, size) in enumerate(zip(paths, sizes))]
    io = CountingFileIO()
    table = pa.Table.from_batches(list(read_lake_files(io, ranges, LOG_SCHEMA, 100, workers=3)), schema=LOG_SCHEMA)
    assert table.column("__offset").to_pylist() == list(range(7, 2000))
    assert sorted(io.opened) == sorted(paths), "one open per file, not one for the footer and one per row group"
    # Without the sizes (a plan that does not know them) every row group is a read of its own.
    unsized = CountingFileIO()
    again = list(read_lake_files(unsized, [FileRange(r.path, r.start, r.end) for r in ranges], LOG_SCHEMA, 100, workers=3))
    assert pa.Table.from_batches(again, schema=LOG_SCHEMA).equals(table)
    assert len(unsized.opened) == 40 + 40 * 4


class _LakeTable:
    """The one attribute of a PyIceberg table that reading planned files uses: its FileIO."""

    io = PyArrowFileIO()


def test_the_iceberg_arrow_source_hands_small_files_on_in_combined_batches(tmp_path: Path) -> None:
    paths = [lake_file(tmp_path / f"small-{n}.parquet", n * 200, 200, 200) for n in range(100)]
    ranges = [FileRange(path, n * 200, n * 200 + 200, Path(path).stat().st_size) for n, path in enumerate(paths)]
    info = TableInfo(1, TablePath("db", "small"), pa.schema([("id", pa.int32())]), 1, 1, {})
    source = IcebergArrowLogSource(info, LakeConfig(), Configuration({"client.lake.batch-rows": 5_000}))
    batches = list(source.read_files(_LakeTable(), ranges, LOG_SCHEMA))  # type: ignore[arg-type]
    assert pa.Table.from_batches(batches, schema=LOG_SCHEMA).column("__offset").to_pylist() == list(range(20_000))
    assert [batch.num_rows for batch in batches] == [5_000] * 4, "25 files a batch: up to batch-rows"


def test_a_damaged_small_file_read_whole_is_lake_data_error_naming_it(files: list[str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    ranges = [FileRange(files[0], 0, 1000), FileRange(str(broken), 1000, 2000, broken.stat().st_size)]
    with pytest.raises(LakeDataError, match="broken.parquet"):
        list(read_lake_files(PyArrowFileIO(), ranges, LOG_SCHEMA, 100, 2))


def test_a_file_that_is_not_parquet_is_lake_data_error_naming_it(files: list[str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    ranges = [FileRange(files[0], 0, 1000), FileRange(str(broken), 1000, 2000)]
    with pytest.raises(LakeDataError, match="broken.parquet"):
        list(read_lake_files(PyArrowFileIO(), ranges, LOG_SCHEMA, 100, 3))


def test_spark_parts_split_the_first_file_one_row_group_first_then_whole_groups(files: list[str]) -> None:
    """The Spark LogSource's partitions: a task's rows reach the client when the task ends, so the
    first file is split, its first part one row group, the rest whole row groups up to a size; a
    later file is one part. Together they read each wanted row once, in order."""
    io = PyArrowFileIO()
    ranges = [FileRange(files[0], 130, 1000), FileRange(files[1], 1000, 1300)]
    parts = plan_parts(io, ranges, part_rows=300)
    assert [(part.file.path, part.row_groups) for part in parts] == [
        (files[0], (1,)), (files[0], (2, 3, 4)), (files[0], (5, 6, 7)), (files[1], None),
    ]
    rows = [
        batch
        for part in parts
        for batch in read_lake_file(io, part.file.path, LOG_SCHEMA, part.file.start, part.file.end, 100, part.row_groups, part.footer)
    ]
    assert pa.Table.from_batches(rows, schema=LOG_SCHEMA).column("__offset").to_pylist() == [*range(130, 1000), *range(1000, 1300)]


def test_spark_parts_of_the_first_file_carry_its_footer_so_their_tasks_do_not_read_it_again(files: list[str]) -> None:
    """The client reads the first file's footer to plan its parts; on object storage another read
    of it per task is a request each. The proof: the file's footer destroyed after planning, its
    parts still read every wanted row."""
    io = PyArrowFileIO()
    parts = plan_parts(io, [FileRange(files[0], 130, 1000)], part_rows=300)
    assert len(parts) == 3 and all(part.footer is not None for part in parts)
    with open(files[0], "r+b") as file:
        file.seek(-8, 2)
        file.write(b"\0" * 8)  # the footer's length and the closing magic
    with pytest.raises(LakeDataError, match="0.parquet"):
        list(read_lake_file(io, files[0], LOG_SCHEMA, 130, 1000, 100))
    rows = [
        batch
        for part in parts
        for batch in read_lake_file(io, part.file.path, LOG_SCHEMA, part.file.start, part.file.end, 100, part.row_groups, part.footer)
    ]
    assert pa.Table.from_batches(rows, schema=LOG_SCHEMA).column("__offset").to_pylist() == list(range(130, 1000))


def _fetched(parts: list[FilePart], columns: list[str]) -> list[tuple[int, int, int, bytes, bool]]:
    """What a read's Spark tasks send, as the client receives it: one tuple per piece."""
    read = pickle.loads(pickle.dumps(LakeRead({}, tuple(parts), tuple(columns))))
    indexes = iter([pa.record_batch([pa.array(range(len(parts)))], names=["id"])])
    return [tuple(row.values()) for batch in fetch_parts_in_task(read, indexes) for row in batch.to_pylist()]


@pytest.mark.parametrize("piece_bytes", [PIECE_BYTES, 100], ids=["whole column chunks", "chunks cut into pieces"])
def test_spark_tasks_send_the_files_bytes_and_the_client_decodes_every_wanted_row_in_order(
    files: list[str], piece_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spark_file_task, "PIECE_BYTES", piece_bytes)
    ranges = [FileRange(files[0], 130, 1000), FileRange(files[1], 1000, 1300)]
    parts = plan_parts(PyArrowFileIO(), ranges, part_rows=300)
    pieces = _fetched(parts, LOG_SCHEMA.names)
    # The second file's part was not planned from its footer: its task sends the footer first.
    assert [piece[1] for piece in pieces if piece[0] == 3][0] == FOOTER_GROUP
    assert (max(len(piece[3]) for piece in pieces if piece[1] != FOOTER_GROUP) <= 100) == (piece_bytes == 100)
    batches = list(decode_fetched(pieces, parts, LOG_SCHEMA, 100, 2))
    table = pa.Table.from_batches(batches, schema=LOG_SCHEMA)
    assert table.column("__offset").to_pylist() == [*range(130, 1000), *range(1000, 1300)]
    assert table.column("id").to_pylist() == [*range(130, 1000), *range(1000, 1300)]
    assert table.column("__timestamp").to_pylist() == [*range(130, 1000), *range(1000, 1300)]


def test_a_spark_task_sends_only_the_wanted_columns_bytes(tmp_path: Path) -> None:
    """A projected read: the tasks send the chunks of the projected columns (and the meta ones), not
    the row groups' other columns."""
    rows = 2000
    wide = pa.table({"id": pa.array(range(rows), pa.int64()), "payload": pa.array([f"{n:0>200}" for n in range(rows)])})
    offsets = pa.array(range(rows), pa.int64())
    timestamps = pa.array(range(rows), pa.timestamp("us", tz="UTC"))
    wide = wide.append_column("__bucket", pa.array([0] * rows, pa.int32())).append_column("__offset", offsets).append_column("__timestamp", timestamps)
    path = str(tmp_path / "wide.parquet")
    pq.write_table(wide, path, row_group_size=500, compression="none")
    projected = with_meta_fields(pa.schema([("id", pa.int64())]))
    parts = [FilePart(FileRange(path, 0, rows))]
    pieces = _fetched(parts, projected.names)
    sent = sum(len(piece[3]) for piece in pieces)
    assert sent < Path(path).stat().st_size / 5  # the payloads, 85% of the file, stay behind
    table = pa.Table.from_batches(list(decode_fetched(pieces, parts, projected, 1000, 1)), schema=projected)
    assert table.column("id").to_pylist() == list(range(rows))


def test_a_read_outside_the_fetched_pieces_is_lake_data_error_naming_the_file() -> None:
    """Bytes the tasks did not send (before the first piece, in a gap between pieces) are never
    read as zeros or as another piece's bytes."""
    pieces = FilePieces("s3://lake/f.parquet")
    pieces.add(100, b"abcd")
    pieces.add(110, b"efgh")
    pieces.seek(101)
    assert bytes(pieces.read(3)) == b"bcd"
    for position in (0, 99, 104, 109):
        pieces.seek(position)
        with pytest.raises(LakeDataError, match="s3://lake/f.parquet"):
            pieces.read(2)


def test_a_damaged_page_fetched_by_spark_fails_on_the_client_naming_the_file(files: list[str]) -> None:
    """Page checksums are verified where the rows are decoded: a flipped byte in a column chunk is a
    LakeDataError naming the data file, not other values."""
    pq.write_table(pq.read_table(files[1]), files[1], row_group_size=128, write_page_checksum=True)
    parts = [FilePart(FileRange(files[1], 1000, 2000))]
    pieces = _fetched(parts, LOG_SCHEMA.names)
    part, group, position, data, last = next(piece for piece in pieces if piece[1] == 0)
    damaged = bytearray(data)
    damaged[-1] ^= 0xFF
    pieces = [(part, group, position, bytes(damaged), last) if piece[1] == 0 else piece for piece in pieces]
    with pytest.raises(LakeDataError, match="1.parquet"):
        list(decode_fetched(pieces, parts, LOG_SCHEMA, 100, 2))


def test_a_file_damaged_past_its_footer_read_by_spark_is_lake_data_error_naming_it(files: list[str]) -> None:
    """A task that finds a later file truncated (its footer gone) says so in its answer: the client
    raises LakeDataError naming the file, after the earlier file's rows, as the iceberg-arrow
    LogSource does, not the retriable error of a failed Spark job."""
    Path(files[1]).write_bytes(Path(files[1]).read_bytes()[:300])
    ranges = [FileRange(files[0], 0, 1000), FileRange(files[1], 1000, 2000)]
    parts = plan_parts(PyArrowFileIO(), ranges, part_rows=10_000)
    pieces = _fetched(parts, LOG_SCHEMA.names)
    assert [piece[1] for piece in pieces][-1] == DAMAGED_GROUP
    rows = decode_fetched(pieces, parts, LOG_SCHEMA, 1000, 3)
    offsets = []
    with pytest.raises(LakeDataError, match=f"^cannot read lake data file {files[1]}: it does not end with a Parquet footer"):
        for batch in rows:
            offsets.extend(batch.column("__offset").to_pylist())
    assert offsets == list(range(0, 1000))


def test_a_spark_lake_task_leaves_the_workers_imported_modules_out_of_pysparks_collection_after_it(files: list[str]) -> None:
    """PySpark runs a full gc.collect() in its reused worker after every task; with pyarrow and
    PyIceberg imported that walk was a sixth of a lake read's task CPU. Run as a worker runs it (a
    fresh interpreter), the task sends every wanted row, and everything alive when it began is
    frozen, out of that walk."""
    script = textwrap.dedent(
        f"""
        import gc
        import pyarrow as pa
        from pyiceberg.io.pyarrow import PyArrowFileIO
        from lakelog.lake.fetched_row_groups import decode_fetched
        from lakelog.lake.iceberg_file_reader import FileRange
        from lakelog.lake.spark_file_task import plan_parts
        from tests.system.test_lake_file_reader import LOG_SCHEMA, _fetched
        parts = plan_parts(PyArrowFileIO(), [FileRange({files[0]!r}, 130, 1000)], part_rows=300)
        assert gc.get_freeze_count() == 0
        batches = decode_fetched(_fetched(parts, LOG_SCHEMA.names), parts, LOG_SCHEMA, 100, 1)
        offsets = [o for batch in batches for o in batch.column("__offset").to_pylist()]
        print(offsets == list(range(130, 1000)), gc.get_freeze_count())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2], check=False)
    assert done.returncode == 0, done.stderr
    rows_exact, frozen = done.stdout.split()
    assert rows_exact == "True"
    assert int(frozen) > 100_000  # pyarrow's, PyIceberg's and pydantic's objects
