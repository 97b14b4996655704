"""The seeded random-walk harness (see tests/harness/walk.py).

CI runs seeds 1-20; ``LAKELOG_WALK_SEEDS`` (a count like ``1000``, seeds like ``7,42`` or a range like
``78-1000``) and ``LAKELOG_WALK_STEPS`` choose the long mode. A failure prints the seed and the steps to replay it.
"""

from __future__ import annotations

import os

import pytest

from tests.harness.cluster import Cluster
from tests.harness.walk import Walk

QUICK_SEEDS = range(1, 21)
QUICK_STEPS = 200


def seeds_from_environment() -> list[int]:
    text = os.environ.get("LAKELOG_WALK_SEEDS", "")
    if not text:
        return []
    if "-" in text:
        first, _, last = text.partition("-")
        return list(range(int(first), int(last) + 1))
    return [int(s) for s in text.split(",")] if "," in text or len(text) < 3 else list(range(1, int(text) + 1))


SEEDS = seeds_from_environment() or list(QUICK_SEEDS)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_walk(seed: int, tmp_path, moto_s3, spark) -> None:
    Walk(seed, int(os.environ.get("LAKELOG_WALK_STEPS", QUICK_STEPS)), Cluster(tmp_path, moto_s3, spark)).run()
