"""What every Spark task of lakelog's does first, in the Python worker that runs it.

PySpark reuses a Python worker for task after task and runs a full ``gc.collect()`` after each one
(``pyspark/daemon.py``). A full collection walks every object the worker holds, and a worker that
ran a lakelog task holds pyarrow, PyIceberg and pydantic's modules: tens of milliseconds per task,
a large share of the workers' CPU in a lake read through Spark Connect. Freezing the
heap as a task starts (``gc.freeze``: what exists then is left out of every later collection) leaves
that collection only the objects the task made. What is frozen stays alive, which the imported
modules do anyway. Frozen garbage would never be freed, so this relies on the collection PySpark
runs between tasks: a task starts with the garbage of the ones before it collected.
"""

from __future__ import annotations

import gc


def freeze_worker_heap() -> None:
    """Leave everything alive now out of the collections PySpark runs after each task."""
    gc.freeze()
