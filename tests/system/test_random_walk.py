"""The seeded random-walk harness (see tests/harness/walk.py), and its replicated variant on OS
processes (tests/harness/replica_walk.py).

CI runs seeds 1-20; ``LAKELOG_WALK_SEEDS`` (a count like ``1000``, seeds like ``7,42`` or a range like
``78-1000``) and ``LAKELOG_WALK_STEPS`` choose the long mode. The replicated walk runs seeds 1-7, 50
steps each, in CI; ``LAKELOG_REPLICA_WALK_SEEDS`` and ``LAKELOG_REPLICA_WALK_STEPS`` do the same for
it. A failure prints the seed and the steps to replay it.
"""

from __future__ import annotations

import os

import pytest

from tests.harness.cluster import Cluster
from tests.harness.replica_walk import ReplicaWalk, replica_cluster
from tests.harness.walk import Walk

QUICK_SEEDS = range(1, 21)
QUICK_STEPS = 200
REPLICATED_QUICK_SEEDS = range(1, 8)
REPLICATED_QUICK_STEPS = 50


def seeds_from_environment(variable: str = "LAKELOG_WALK_SEEDS") -> list[int]:
    text = os.environ.get(variable, "")
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


@pytest.mark.parametrize("seed", seeds_from_environment("LAKELOG_REPLICA_WALK_SEEDS") or list(REPLICATED_QUICK_SEEDS))
def test_replicated_random_walk(seed: int, tmp_path) -> None:
    steps = int(os.environ.get("LAKELOG_REPLICA_WALK_STEPS", REPLICATED_QUICK_STEPS))
    ReplicaWalk(seed, steps, replica_cluster(tmp_path)).run()
