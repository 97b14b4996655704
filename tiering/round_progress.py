"""What a tiering round is doing while it runs, on stderr: per table the records it plans to tier,
then the Spark tasks' progress toward them (the job logs each table's commit, records and bytes).

A bar on a terminal, plain lines otherwise (:mod:`lakelog.progress`). The tasks' progress
comes from Spark itself: the status tracker of a classic session (polled), the progress reports a
Spark Connect server streams (a handler). Splits of a round are cut to about the same size, so
records written are estimated as the planned records times the share of tasks finished.
"""

from __future__ import annotations

import threading
import uuid
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from lakelog.progress import Progress, counted
from lakelog.metadata import TablePath

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# How often the status tracker of a classic session is read while tasks run.
POLL_INTERVAL_S = 0.5


class RoundProgress:
    """One round's progress: :meth:`planned`, then :meth:`tasks` around the Spark job, then :meth:`finished`."""

    def __init__(self, label: str, spark: "SparkSession", verb: str = "tier") -> None:
        """``label`` heads every line; ``verb`` says what the tasks do to the records."""
        self._label = label
        self._verb = verb
        self._spark = spark
        self._progress: Progress | None = None
        self._planned = 0

    def planned(self, tables: Mapping[TablePath, tuple[int, int]]) -> None:
        """``tables``: per table, (records, splits) this round tiers."""
        self._planned = sum(records for records, _ in tables.values())
        self._progress = Progress(self._label, self._planned).__enter__()
        for path, (records, splits) in tables.items():
            self._progress.note(f"{self._label}: {path}: {counted(records, 'record')} to {self._verb} in {counted(splits, 'task')}")

    @contextmanager
    def tasks(self) -> Iterator[None]:
        """Follow the Spark job run inside; the bar moves as its tasks finish."""
        if self._progress is None or not self._planned:
            yield
            return
        if _is_connect(self._spark):
            handler = _ConnectHandler(self._on_tasks)
            self._spark.registerProgressHandler(handler)  # type: ignore[attr-defined]
            try:
                yield
            finally:
                self._spark.removeProgressHandler(handler)  # type: ignore[attr-defined]
            return
        with _tracked_job_group(self._spark, self._on_tasks):
            yield

    def finished(self, records: int) -> None:
        if self._progress is not None:
            self._progress.set_count(records)
            self._progress.close()

    def _on_tasks(self, completed: int, total: int) -> None:
        if self._progress is not None and total:
            estimate = self._planned * min(completed, total) // total
            if estimate > self._progress.count:
                self._progress.advance(estimate - self._progress.count)


def _is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


class _ConnectHandler:
    """A Spark Connect progress handler: each report lists the operation's stages and their tasks."""

    def __init__(self, report: Any) -> None:
        self._report = report

    def __call__(self, stages: Any, inflight_tasks: int, operation_id: Any, done: bool) -> None:
        stages = list(stages or [])
        self._report(sum(s.num_completed_tasks for s in stages), sum(s.num_tasks for s in stages))


@contextmanager
def _tracked_job_group(spark: "SparkSession", report: Any) -> Iterator[None]:
    """Run the block's Spark jobs under a job group of their own and poll their tasks (a shared
    session may run other jobs at the same time; they are not counted)."""
    context = spark.sparkContext
    group = f"lakelog-tier-{uuid.uuid4().hex[:8]}"
    tracker = context.statusTracker()
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(POLL_INTERVAL_S):
            completed = total = 0
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                for stage_id in job.stageIds if job else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        completed, total = completed + stage.numCompletedTasks, total + stage.numTasks
            report(completed, total)

    context.setJobGroup(group, "lakelog tiering round")
    poller = threading.Thread(target=poll, name="tier-progress", daemon=True)
    poller.start()
    try:
        yield
    finally:
        stop.set()
        poller.join()
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
