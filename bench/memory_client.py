"""The client whose memory benchmark 8 measures, run as its own process: it scans a table from
the beginning (``iceberg-arrow`` for the lake) and prints, as JSON, what it read, its peak RSS and
where that memory was at the highest sample (:class:`PeakSampler`)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
from dataclasses import asdict, dataclass

import pyarrow as pa

import lakelog
from lakelog.metadata import TablePath

from bench.measure import peak_rss_mb
from bench.scan import drain

SAMPLE_S = 0.05
MB = 1 << 20  # as peak_rss_mb counts them
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
# mimalloc (Arrow's default pool) reserves its arenas in anonymous mappings of 1 GiB and more; glibc's
# heaps and large mallocs (gRPC's buffers, Python's objects) and thread stacks are smaller ones.
ARENA_BYTES = 1 << 30
_MAPPING = re.compile(r"([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \d+\s*(.*)")


@dataclass
class ResidentMemory:
    """A process's resident memory in MB by kind of mapping, from ``/proc/self/smaps``."""

    rss_mb: float = 0.0
    arena_mb: float = 0.0  # resident in mimalloc's arenas
    arrow_allocated_mb: float = 0.0  # of which Arrow's pool had handed out at that moment
    other_anonymous_mb: float = 0.0
    files_mb: float = 0.0  # code and data of the interpreter and its libraries

    @classmethod
    def now(cls) -> "ResidentMemory":
        memory = cls(arrow_allocated_mb=pa.default_memory_pool().bytes_allocated() / MB)
        size, name = 0, ""
        with open("/proc/self/smaps") as smaps:
            for line in smaps:
                mapping = _MAPPING.match(line)
                if mapping:
                    size, name = int(mapping[2], 16) - int(mapping[1], 16), mapping[3]
                elif line.startswith("Rss:"):
                    mb = int(line.split()[1]) * 1024 / MB
                    memory.rss_mb += mb
                    if name.startswith("/"):
                        memory.files_mb += mb
                    elif not name and size >= ARENA_BYTES:
                        memory.arena_mb += mb
                    else:
                        memory.other_anonymous_mb += mb
        return memory


class PeakSampler:
    """Samples RSS every ``SAMPLE_S`` on a thread of its own and keeps the breakdown of the
    highest sample: reading smaps costs milliseconds, so it is read only when RSS grew."""

    def __init__(self) -> None:
        self.peak = ResidentMemory()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> "PeakSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            with open("/proc/self/statm") as statm:
                rss_mb = int(statm.read().split()[1]) * PAGE_BYTES / MB
            if rss_mb > self.peak.rss_mb + 1:
                self.peak = ResidentMemory.now()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("table", help="DB.TABLE")
    parser.add_argument("records", type=int, help="records to read (0: only connect)")
    parser.add_argument("config", help="client config as JSON")
    args = parser.parse_args()
    database, name = args.table.split(".")
    with PeakSampler() as sampler, lakelog.connect(args.bootstrap, json.loads(args.config)) as conn:
        table = conn.get_table(TablePath(database, name))
        read = drain(table, args.records) if args.records else 0
    peaks = {"rss_peak_mb": peak_rss_mb(), "arrow_pool_peak_mb": pa.default_memory_pool().max_memory() / 1e6}
    json.dump({"records": read, **peaks, "at_peak": asdict(sampler.peak)}, sys.stdout)


if __name__ == "__main__":
    main()
