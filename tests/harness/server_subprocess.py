"""A server in its own process (`python -m lakelog server`), for tests that kill it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


class ServerSubprocess:
    """`python -m lakelog server` in its own process, for kill -9 tests."""

    def __init__(self, data_dir: Path, *extra: str, open_files: tuple[int, int] | None = None) -> None:
        """``open_files``: the process's soft and hard limits on open files (default: this one's)."""
        self.data_dir = data_dir
        self.extra = extra
        self.open_files = open_files
        self.proc: subprocess.Popen[str] | None = None
        self.address = ""

    def _limit_open_files(self) -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, self.open_files)

    def start(self) -> "ServerSubprocess":
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lakelog", "server", "--data-dir", str(self.data_dir), "--port", "0", *self.extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            preexec_fn=self._limit_open_files if self.open_files else None,
        )
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if "listening on" in line:
                self.address = line.rsplit(" ", 1)[1].strip()
                return self
        raise AssertionError(f"server exited with {self.proc.wait()} before listening")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
