"""A lake table tiered in many small rounds, for compaction: its rows, its data files."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

import lakelog
from lakelog.server.server_process import ServerProcess
from lakelog.tiering.tiering_job import TieringJob, TieringOptions
from tests.harness.lake_tier import LAKE_TABLE, lake_table
from tests.harness.tables import produce_orders

BUCKETS = 2
PATH = lakelog.TablePath("shop", "orders")
# Every round's file is a few tens of KB: all small, and a whole bucket fits one file.
COMPACTED_TABLE = {**LAKE_TABLE, "table.datalake.target-file-size": "4mb"}


def lake_rows(server: ServerProcess, path: lakelog.TablePath = PATH, snapshot_id: int | None = None) -> pa.Table:
    """Plain PyIceberg's read of the lake table (at ``snapshot_id``), by bucket and offset."""
    table = lake_table(server, path)
    rows = table.scan(snapshot_id=snapshot_id).to_arrow() if snapshot_id is not None else table.scan().to_arrow()
    return rows.sort_by([("__bucket", "ascending"), ("__offset", "ascending")])


def data_files(server: ServerProcess, path: lakelog.TablePath = PATH) -> list[str]:
    return lake_table(server, path).inspect.files().column("file_path").to_pylist()


def tier_rounds(spark: Any, server: ServerProcess, table: lakelog.Table, rounds: int, records: int, first: int = 0) -> int:
    """``rounds`` rounds of ``records`` new records each: one small file per bucket per round."""
    with TieringJob(TieringOptions(server.address, tables=(table.path,)), spark=spark) as job:
        for index in range(rounds):
            produce_orders(table, first + index * records, records, batch=500)
            assert job.run_round().records == records
    return first + rounds * records
