"""``python -m lakelog.tiering ARGS`` or ``spark-submit lakelog/tiering/__main__.py ARGS``: the
tiering job with the arguments of ``lakelog tier``."""

import sys

from lakelog.cli.main import main

sys.exit(main(["tier", *sys.argv[1:]]))
