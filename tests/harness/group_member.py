"""A consumer group member as its own OS process, for the group process tests and benchmarks.

``python -m tests.harness.group_member BOOTSTRAP DB.TABLE GROUP OUT [--session-timeout 2s] [--max-poll-records N]
[--pause-ms N]`` joins GROUP, polls, and appends every record a poll returned to OUT as lines
``partition_id bucket offset`` (partition 0: none), written and flushed before the next poll, whose
auto-commit covers them: so OUT holds at least what the group committed for this member. SIGTERM
ends it cleanly: the scanner closes (commits, leaves). Its pid is OUT's first line.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

import lakelog


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("table")
    parser.add_argument("group")
    parser.add_argument("out")
    parser.add_argument("--session-timeout", default="2s")
    parser.add_argument("--max-poll-records", type=int, default=-1)
    parser.add_argument("--pause-ms", type=int, default=0)
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    database, table_name = args.table.split(".")
    config = {"client.scanner.group.session-timeout": args.session_timeout, "client.scanner.max-poll-records": args.max_poll_records}
    with lakelog.connect(args.bootstrap, config) as conn, open(args.out, "a") as out:
        table = conn.get_table(lakelog.TablePath(database, table_name))
        with table.new_scan().create_log_scanner(group=args.group) as scanner:
            out.write(f"{os.getpid()}\n")
            out.flush()
            while not stop.is_set():
                records = scanner.poll(timeout_ms=200)
                out.write("".join(f"{r.partition_id or 0} {r.bucket} {r.offset}\n" for r in records))
                out.flush()
                if args.pause_ms:
                    time.sleep(args.pause_ms / 1000)


if __name__ == "__main__":
    main(sys.argv[1:])
