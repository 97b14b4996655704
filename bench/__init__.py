"""lakelog's benchmarks: each data path against the bare parts it is built on, in one run.

``python -m bench.run`` (``make bench``) runs them all and writes ``bench/REPORT.md`` and
``bench/throughput.png``. They are measurements, not tests: nothing here asserts a time.
"""
