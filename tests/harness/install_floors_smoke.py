"""Run by tests/system/test_install_floors.py with the floor venv's Python (not collected by pytest):
start a server, produce rows and Arrow data, scan them back, then print the installed versions
of lakelog's dependencies as JSON so the test can check that the floors are what ran."""

from __future__ import annotations

import json
import sys
import tempfile
from importlib.metadata import version

import pyarrow as pa

import lakelog
from lakelog.server.server_process import ServerProcess

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def main() -> None:
    with tempfile.TemporaryDirectory() as data_dir, ServerProcess({"data.dir": data_dir, "server.port": 0}) as server:
        with lakelog.connect(server.address) as conn:
            path = lakelog.TablePath("shop", "orders")
            conn.admin.create_database("shop")
            conn.admin.create_table(path, lakelog.TableDescriptor(SCHEMA, buckets=2))
            table = conn.get_table(path)
            with table.new_append().create_writer() as writer:
                writer.append({"id": 0, "name": "row"})
                writer.append_arrow(pa.table({"name": ["a", "b"], "id": [1, 2]}))
            with table.new_scan().create_log_scanner() as scanner:
                scanner.subscribe_from_beginning()
                rows = scanner.to_arrow()
    assert sorted(rows.column("id").to_pylist()) == [0, 1, 2], rows
    packages = sys.argv[1:]
    print(json.dumps({"lakelog": lakelog.__version__, "records": rows.num_rows, "versions": {p: version(p) for p in packages}}))


if __name__ == "__main__":
    main()
