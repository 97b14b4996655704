"""Timing, percentiles, peak RSS and profiling: how every benchmark measures.

Each benchmark is several runs and reports the median, because the machine (2 cores, shared) is
noisy; a path and its baseline run in turns (:func:`medians_in_turns`), so that the load drifting
during a benchmark moves both sides of a ratio alike. Latencies are per call, reported as p50 and
p99. A path that misses its target is run once more under py-spy, which samples every thread of this process and of its children (the server
processes' gRPC threads included, unlike a main-thread profiler), and its top self-time frames go
into the report.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

PROFILE_RATE_HZ = 200
TOP_FRAMES = 5


def progress(text: str) -> None:
    """Progress goes to stderr so a run can be followed; the results go to the report."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


@dataclass
class Result:
    """One line of the report. ``score`` is what the target is checked on: a ratio to the baseline
    (higher is better), or an absolute value (latency ms, RSS MB) when ``lower_is_better``."""

    key: str
    name: str
    value: float
    unit: str
    baseline: float | None
    baseline_name: str
    score: float
    target: float | None  # None: reported, no target
    lower_is_better: bool = False
    detail: str = ""
    tier: str = ""  # set for the throughput chart
    next_step: str = ""  # what would close the gap, should the target be missed
    profile: list[str] = field(default_factory=list)
    profile_heading: str = (
        "Where the time goes (py-spy, every thread of the benchmark process and its children, top frames by self time):"
    )

    @property
    def met(self) -> bool:
        if self.target is None:
            return True
        return self.score < self.target if self.lower_is_better else self.score >= self.target

    @property
    def target_text(self) -> str:
        if self.target is None:
            return "(reported)"
        return f"< {self.target:g} {self.unit}" if self.lower_is_better else f">= {self.target:g}x"

    @property
    def shortfall(self) -> str:
        """How far a missed target is: the fraction of it reached, or how much over it."""
        if self.met or self.target is None:
            return ""
        if self.lower_is_better:
            return f"{self.score / self.target:.1f}x the limit"
        return f"{self.score / self.target:.0%} of target"


def timed(run: Callable[[], object]) -> float:
    began = time.perf_counter()
    run()
    return time.perf_counter() - began


def median_seconds(run: Callable[[], object], runs: int, before: Callable[[], object] | None = None) -> float:
    """Median wall time of ``runs`` calls of ``run``; ``before`` (untimed) prepares each one."""
    return medians_in_turns(runs, Trial(run, before))[0]


@dataclass(frozen=True)
class Trial:
    """One kind of run that a benchmark times: ``run`` is timed, ``before`` (untimed) prepares each one."""

    run: Callable[[], object]
    before: Callable[[], object] | None = None


def medians_in_turns(runs: int, *trials: Trial) -> list[float]:
    """The median wall time of each trial over ``runs`` rounds, each round running every trial
    once and each trial first in its turn. This machine's load drifts within a benchmark (other
    processes, the page cache filling, a server's background work): run as blocks one after the
    other, a path and its baseline would meet different loads and their ratio would carry the drift."""
    samples: list[list[float]] = [[] for _ in trials]
    for round_index in range(runs):
        for step in range(len(trials)):
            index = (round_index + step) % len(trials)
            trial = trials[index]
            if trial.before is not None:
                trial.before()
            samples[index].append(timed(trial.run))
    return [statistics.median(times) for times in samples]


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) process ``pid`` used so far, its threads' included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def latencies_ms(calls: Sequence[Callable[[], object]]) -> list[float]:
    return [timed(call) * 1000 for call in calls]


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(round(q / 100 * (len(ordered) - 1))), len(ordered) - 1)]


def peak_rss_mb() -> float:
    """This process's peak resident set in MB: the kernel's high-water mark of its memory since
    exec (``VmHWM``), so no short peak is missed. Not ``ru_maxrss`` of a child: Linux carries the
    parent's RSS at fork over into it."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status (not Linux?)")


def profile_top(run: Callable[[], object], top: int = TOP_FRAMES) -> list[str]:
    """Run ``run`` under py-spy (every thread of this process and of its children: Spark's Python
    workers, moto) and return its ``top`` frames by self time, as ``function (file:line) share%``.
    Empty when py-spy cannot attach."""
    with tempfile.TemporaryDirectory(prefix="lakelog-bench-profile-") as directory:
        out = Path(directory) / "samples.txt"
        spy = subprocess.Popen(
            ["py-spy", "record", "--pid", str(os.getpid()), "--rate", str(PROFILE_RATE_HZ), "--format", "raw",
             "--output", str(out), "--nonblocking", "--subprocesses"],
            executable=str(Path(sys.executable).with_name("py-spy")),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)  # let it attach
        try:
            run()
        finally:
            spy.send_signal(signal.SIGINT)
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
        if not out.exists():
            return []
        return _top_self_frames(out.read_text(), top)


# Threads parked in these are waiting, not working; py-spy does not always tell (in C, across processes).
WAITING_FUNCTIONS = frozenset({
    "Condition.wait", "Event.wait", "Thread.join", "Queue.get", "SocketIO.readinto", "select",
    "_worker",  # concurrent.futures' idle pool threads
    "_run_channel_spin_thread.<locals>.channel_spin", "_serve",  # grpc's polling threads
    "manager", "FinalizerWorker.run",  # PySpark's worker daemon, Py4J
})


def _top_self_frames(raw: str, top: int) -> list[str]:
    """py-spy's raw format is one ``frame;frame;...;leaf count`` line per stack; a stack's leaf is
    where the time went. Shares are of the samples left once waiting threads are dropped."""
    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        leaf = stack.rsplit(";", 1)[-1].strip()
        if stack and count.isdigit() and leaf.split(" (", 1)[0] not in WAITING_FUNCTIONS:
            counts[leaf] += int(count)
    total = sum(counts.values()) or 1
    return [f"`{frame} {count / total:.0%}`" for frame, count in counts.most_common(top)]


def profile_if_missed(result: Result, run: Callable[[], object]) -> Result:
    """Profile ``run`` (the lakelog side of ``result``) when the target is missed."""
    if not result.met:
        progress(f"{result.key}: target missed ({result.shortfall}); profiling the lakelog side with py-spy")
        result.profile = profile_top(run)
    return result

