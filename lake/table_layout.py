"""How a lake-enabled table is laid out in Iceberg: name, system columns, partitioning (by the log table's
partition keys, then by bucket), sort order, table properties and where data files go.

Everything that reads or writes a lake table (the coordinator creating it, the tiering job writing
it, the LogSource plugins reading it) takes these facts from here.
"""

from __future__ import annotations

import uuid
from typing import Mapping, Sequence

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.transforms import IdentityTransform

from lakelog.metadata import TablePath
from lakelog.record.meta_columns import BUCKET_COLUMN, OFFSET_COLUMN

PARTITION_FIELD_ID = 1000
DATA_FILE_SUFFIX = ".parquet"
# A data file below this share of table.datalake.target-file-size is small: compaction merges it
# with its neighbours (the share Iceberg's own rewrite uses), and the lake's numbers count it.
SMALL_FILE_SHARE = 0.75
# Exactly once rests on a commit being refused when the table moved since the round was planned.
# PyIceberg would otherwise retry a refused append on top of the new snapshot: the same offsets twice.
COMMIT_RETRIES = "commit.retry.num-retries"

TABLE_PROPERTIES = {
    "format-version": "2",
    COMMIT_RETRIES: "0",
    "write.parquet.compression-codec": "zstd",
}


def identifier(path: TablePath) -> tuple[str, str]:
    """Namespace = database, name = table."""
    return (path.database, path.table)


def partition_spec(schema: Schema, partition_keys: Sequence[str] = ()) -> PartitionSpec:
    """identity of each partition key of a partitioned log table, then identity(__bucket): a
    bucket's records of one round form one file in one Iceberg partition, and a read of one log
    partition touches only its own files."""
    columns = [*partition_keys, BUCKET_COLUMN]
    return PartitionSpec(
        *(
            PartitionField(
                source_id=schema.find_field(column).field_id, field_id=PARTITION_FIELD_ID + index, transform=IdentityTransform(), name=column
            )
            for index, column in enumerate(columns)
        )
    )


def sort_order(schema: Schema) -> SortOrder:
    """Rows sorted by __offset, as they are in the log."""
    return SortOrder(SortField(source_id=schema.find_field(OFFSET_COLUMN).field_id, transform=IdentityTransform()))


def data_location(table: Table) -> str:
    """Where the table's data files live (``write.data.path``, else ``<location>/data``)."""
    return table.properties.get("write.data.path", f"{table.location().rstrip('/')}/data")


def new_data_file_path(data_root: str, bucket: int, start_offset: int, end_offset: int, partition: Mapping[str, str] | None = None) -> str:
    """A fresh, never reused file name in the bucket's partition directory (under the log
    partition's ``key=value`` directories, ``partition`` in key order); the offsets in it help
    whoever looks at the warehouse, the random part keeps two jobs' files apart. Partition values
    are safe as path parts (:func:`lakelog.metadata.validate_partition_value`)."""
    directories = "".join(f"{key}={value}/" for key, value in (partition or {}).items())
    return f"{data_root}/{directories}{BUCKET_COLUMN}={bucket}/{_file_name(start_offset, end_offset)}"


def sibling_data_file_path(sibling: str, start_offset: int, end_offset: int) -> str:
    """A fresh file name beside the data file ``sibling`` (same partition directory): where a
    compaction puts the file that replaces ``sibling`` and its neighbours."""
    return f"{sibling.rsplit('/', 1)[0]}/{_file_name(start_offset, end_offset)}"


def _file_name(start_offset: int, end_offset: int) -> str:
    return f"{start_offset:020d}-{end_offset:020d}-{uuid.uuid4().hex}{DATA_FILE_SUFFIX}"
