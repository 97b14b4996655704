"""How a benchmark times a path against its baseline (bench/measure.py): in rounds that run each
once, the first place rotating, so a load that drifts during the benchmark falls on both sides."""

from __future__ import annotations

from typing import Callable

import pytest

from bench import measure
from bench.measure import Trial, medians_in_turns


def test_trials_take_turns_and_each_median_is_of_its_own_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock[0])
    order: list[str] = []

    def run(name: str, seconds: list[float]) -> Callable[[], None]:
        def advance() -> None:
            order.append(name)
            clock[0] += seconds.pop(0)

        return advance

    def prepare() -> None:
        order.append("prepare a")
        clock[0] += 100.0  # untimed: it must not count in a's runs

    a = Trial(run("a", [1.0, 5.0, 3.0]), before=prepare)
    b = Trial(run("b", [2.0, 2.0, 9.0]))

    assert medians_in_turns(3, a, b) == [3.0, 2.0]
    assert order == ["prepare a", "a", "b", "b", "prepare a", "a", "prepare a", "a", "b"]


def test_three_trials_each_lead_a_round() -> None:
    order: list[str] = []
    trials = [Trial(lambda name=name: order.append(name)) for name in "abc"]

    medians_in_turns(3, *trials)

    assert [order[i] for i in (0, 3, 6)] == ["a", "b", "c"]
    assert sorted(order) == sorted("abc" * 3)
