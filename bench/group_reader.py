"""A consumer group member for the group benchmarks, as its own process:
``python -m bench.group_reader BOOTSTRAP DB.TABLE GROUP GO_FILE``. It connects, prints ``ready``,
waits for GO_FILE to exist (so process start and imports stay out of the timing), then joins GROUP
and polls until SIGTERM, which closes the scanner (commit, leave)."""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

import lakelog


def main(bootstrap: str, table: str, group: str, go: str) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    database, name = table.split(".")
    with lakelog.connect(bootstrap) as conn:
        handle = conn.get_table(lakelog.TablePath(database, name))
        print("ready", flush=True)
        while not Path(go).exists() and not stop.is_set():
            time.sleep(0.005)
        with handle.new_scan().create_log_scanner(group=group) as scanner:
            while not stop.is_set():
                scanner.poll(timeout_ms=100)


if __name__ == "__main__":
    main(*sys.argv[1:5])
