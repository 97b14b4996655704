"""The columns lakelog adds to a table's own: where each record sits in the log.

The scanner's columnar form, the lake tables, the Spark reader and the CLI all name them from here,
and a table may not use these names for columns of its own.
"""

from __future__ import annotations

import pyarrow as pa

BUCKET_COLUMN = "__bucket"
OFFSET_COLUMN = "__offset"
TIMESTAMP_COLUMN = "__timestamp"
META_COLUMNS = (BUCKET_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN)
META_FIELDS = (
    pa.field(BUCKET_COLUMN, pa.int32(), nullable=False),
    pa.field(OFFSET_COLUMN, pa.int64(), nullable=False),
    pa.field(TIMESTAMP_COLUMN, pa.int64(), nullable=False),
)


# A partitioned table's scans add the partition's id after the other meta columns.
PARTITION_ID_COLUMN = "__partition_id"
PARTITION_ID_FIELD = pa.field(PARTITION_ID_COLUMN, pa.int64(), nullable=False)
RESERVED_COLUMNS = (*META_COLUMNS, PARTITION_ID_COLUMN)


def with_meta_fields(schema: pa.Schema) -> pa.Schema:
    """``schema`` followed by the meta columns: what a scanner returns for it."""
    return pa.schema([*schema, *META_FIELDS])
