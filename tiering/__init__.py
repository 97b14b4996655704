"""The PySpark job that tiers the log into Iceberg exactly once (``lakelog tier``,
``python -m lakelog.tiering``, or ``spark-submit`` of ``lakelog/tiering/__main__.py``).

The driver is :class:`lakelog.tiering.tiering_job.TieringJob`; its module docstring describes a
round and why it is exactly once. Test hook: ``LAKELOG_TIERING_KILL_AT`` (see
:mod:`lakelog.tiering.kill_points`).
"""
