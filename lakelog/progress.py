"""Progress of long work (the CLI's produce, scan and demo, the tiering job's rounds) on stderr,
where stdout keeps the results. In the core, below the CLI, because the tiering job reports with it.

On a terminal: a rich bar with the count, the total, the rate and the time left. Anywhere else (a
log file, CI, a pipe): one plain line every few seconds and one at the end, no carriage returns or
colour codes, so what is saved reads like what was seen.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

def counted(count: int, noun: str) -> str:
    """``1 bucket``, ``3 buckets``, ``1,234,567 records``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


# A plain line at most this often: enough to see a stall, few enough to keep a log readable.
PLAIN_INTERVAL_S = 5.0


class Progress:
    """Counts ``unit``s of work toward ``total`` (None: unknown). Use as a context manager: leaving
    it prints the final count."""

    def __init__(
        self,
        description: str,
        total: int | None = None,
        unit: str = "record",
        stream: TextIO | None = None,
        interval_s: float = PLAIN_INTERVAL_S,
        enabled: bool = True,
    ) -> None:
        """``enabled=False`` shows nothing (the count is still kept): for output that would fight
        the bar for the same terminal."""
        self.description = description
        self.total = total
        self.count = 0
        self._unit = unit
        self._stream = stream if stream is not None else sys.stderr
        self._interval_s = interval_s
        self._enabled = enabled
        self._started = self._last = time.monotonic()
        self._bar: Any = None
        self._task: Any = None
        if enabled and self._stream.isatty():
            self._bar, self._task = _rich_bar(description, total, unit, self._stream)

    def __enter__(self) -> "Progress":
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def advance(self, amount: int) -> None:
        self.count += amount
        if self._bar is not None:
            self._bar.update(self._task, advance=amount)
            return
        now = time.monotonic()
        if self._enabled and now - self._last >= self._interval_s:
            self._last = now
            self._line(now)

    def set_count(self, count: int) -> None:
        """The count as it is now (no plain line printed for it)."""
        self.count = count
        if self._bar is not None:
            self._bar.update(self._task, completed=count)

    def note(self, text: str) -> None:
        """A line of its own above the bar (or among the plain lines)."""
        if self._bar is not None:
            self._bar.console.print(text, highlight=False, markup=False)
        elif self._enabled:
            print(text, file=self._stream, flush=True)

    def close(self, summary: bool = True) -> None:
        """Stop the bar, or print the last plain line (``summary=False``: none, when the caller
        reports a failure in its own words)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif self._enabled:
            if summary:
                self._line(time.monotonic(), final=True)
            self._enabled = False

    def _line(self, now: float, final: bool = False) -> None:
        elapsed = max(now - self._started, 1e-9)
        rate = self.count / elapsed
        done = f"{self.count:,}/{counted(self.total, self._unit)}" if self.total is not None else counted(self.count, self._unit)
        tail = f"{rate:,.0f} {self._unit}s/s"
        if final:
            tail += f", {elapsed:,.1f} s"
        elif self.total is not None and rate > 0 and self.total > self.count:
            tail += f", about {_duration_text((self.total - self.count) / rate)} left"
        print(f"{self.description}: {done} ({tail})", file=self._stream, flush=True)


def _rich_bar(description: str, total: int | None, unit: str, stream: TextIO) -> tuple[Any, Any]:
    """rich's bar, imported only for a terminal (it costs a tenth of a second)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TaskProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    bar = RichProgress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(f"{unit}s"),
        TaskProgressColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(file=stream),
        transient=False,
    )
    task = bar.add_task(description, total=total, rate="")
    return _RateBar(bar, task, unit), task


class _RateBar:
    """rich's Progress with a rate column that reads '12,345 records/s' (rich's own speed column is for bytes)."""

    def __init__(self, bar: Any, task: Any, unit: str) -> None:
        self._bar = bar
        self._task = task
        self._unit = unit

    @property
    def console(self) -> Any:
        return self._bar.console

    def start(self) -> None:
        self._bar.start()

    def stop(self) -> None:
        self._bar.stop()

    def update(self, task: Any, **fields: Any) -> None:
        self._bar.update(task, **fields)
        speed = self._bar.tasks[0].speed
        if speed:
            self._bar.update(task, rate=f"{speed:,.0f} {self._unit}s/s")


def _duration_text(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min {seconds % 60:.0f} s"
    return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:.0f} min"
