"""A server as its own OS process, its output in a log file: what kill -9, SIGSTOP and restarts
need (an in-process server cannot be killed alone)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path
from typing import Callable, Mapping

from tests.harness.waiting import wait_until


def port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


class Process:
    """One server of a cluster as its own OS process, its output in ``<log_dir>/<name>.log``."""

    def __init__(
        self, name: str, args: list[str], log_dir: Path, ready: Callable[[], bool], env: Mapping[str, str] | None = None
    ) -> None:
        self.name = name
        self.args = args
        self.log_path = log_dir / f"{name}.log"
        self.ready = ready
        self.env = dict(env if env is not None else os.environ)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> "Process":
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        wait_until(lambda: self.ready() or self._exited(), f"{self.name} up", 60)
        assert not self._exited(), f"{self.name} exited: {self.log_path.read_text()[-3000:]}"
        return self

    def _exited(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        """Send ``sig``; after SIGKILL once the process is gone, after SIGSTOP once every thread of
        it has stopped. The kernel stops a thread only when it next runs, and on a busy machine a
        thread waiting for a CPU would otherwise still answer a request after this returns."""
        assert self.proc is not None
        self.proc.send_signal(sig)
        if sig == signal.SIGKILL:
            self.proc.wait()
        elif sig == signal.SIGSTOP:
            wait_until(self._stopped, f"every thread of {self.name} stopped", 30)

    def _stopped(self) -> bool:
        """Every thread of the process is stopped (state ``T`` in ``/proc/<pid>/task/<tid>/stat``)."""
        assert self.proc is not None
        states = []
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            try:
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:  # the thread ended meanwhile
                continue
        return all(state in ("T", "t") for state in states)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
