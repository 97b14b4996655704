"""A bucket's log killed (SIGKILL) in its own process mid-write: every acknowledged record is read
back after the reopen, and the interrupted write is gone."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from lakelog.record.batch import iter_headers
from lakelog.server.log.log_tablet import LogConfig, LogTablet


def test_acknowledged_records_survive_kill_9(tmp_path: Path) -> None:
    directory = tmp_path / "killed"
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        import pyarrow as pa
        from pathlib import Path
        from lakelog.record.batch import encode_batch
        from lakelog.server.log.log_tablet import LogConfig, LogTablet

        tablet = LogTablet.open(Path({str(directory)!r}), LogConfig(segment_max_bytes=4000), 0, "killed bucket 0")
        batch = encode_batch(pa.record_batch({{"id": pa.array(range(7), pa.int64())}}), schema_id=1)
        for _ in range(40):
            result = tablet.append(batch)
            print(result.next_offset, flush=True)
        tablet.segments[-1].append(batch[: len(batch) // 2])  # a write the kill interrupts
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    process = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert process.returncode == -signal.SIGKILL, process.stderr
    acknowledged = int(process.stdout.split()[-1])
    assert acknowledged == 280

    tablet = LogTablet.open(directory, LogConfig(segment_max_bytes=4000), 0, "killed bucket 0")
    assert tablet.log_end_offset == acknowledged
    offset, seen = 0, []
    while offset < tablet.high_watermark:
        for _, header in iter_headers(tablet.read(offset, 1 << 20).records):
            base, count = header.base_offset, header.record_count
            seen.append(base)
            offset = base + count
    assert seen == list(range(0, acknowledged, 7))
    tablet.close()
