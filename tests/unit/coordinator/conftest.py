"""Fixtures of the coordinator's unit tests: a Coordinator built directly on a SQLite store in a
temporary directory, three tablet servers registered, database ``shop`` created; its tablet
servers and lake are recording fakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakelog.lake_config import LakeConfig
from lakelog.server.coordinator.coordinator import Coordinator
from tests.harness.coordinator_seams import RecordingLake, RecordingTablets, coordinator_on


@pytest.fixture
def tablets() -> RecordingTablets:
    return RecordingTablets()


@pytest.fixture
def lake() -> RecordingLake:
    return RecordingLake(LakeConfig())


@pytest.fixture
def coordinator(tmpfs_path: Path, tablets: RecordingTablets, lake: RecordingLake) -> Coordinator:
    made = coordinator_on(tmpfs_path, tablets, lake)
    made.create_database("shop")
    return made
