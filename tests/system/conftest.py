"""Fixtures of the system tier: the three-tier table the read-only tests share."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from tests.harness.three_tiers import TieredLog, local_tiered_log


@pytest.fixture(scope="session")
def three_tiers(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredLog]:
    """One table with records only in the lake, then in remote segments, then on local disk, built
    once (two tiering rounds and a remote expiry take a while) for every test that only reads it."""
    built = local_tiered_log(tmp_path_factory.mktemp("three-tiers"), spark)
    yield built
    built.server.stop(0)
