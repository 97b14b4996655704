"""The FetchLog answer budget alone, on an asyncio loop: connections that never give their bytes
back hold at most their share, so another connection is served; within the budget, waiters are
served in order and none is starved."""

from __future__ import annotations

import asyncio
from typing import Awaitable, TypeVar

from lakelog.server.rpc.answer_budget import CONNECTION_SHARES, AnswerBudget

T = TypeVar("T")
CAPACITY = 64
SHARE = CAPACITY // CONNECTION_SHARES


def run(coroutine: Awaitable[T]) -> T:
    return asyncio.run(coroutine)  # type: ignore[arg-type]


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def _full_budget() -> tuple[AnswerBudget, list[int]]:
    """A budget all held, a share each by connections ``c0``, ``c1``, ...; what each holds."""
    budget = AnswerBudget(CAPACITY)
    return budget, [await budget.acquire(SHARE, f"c{n}") for n in range(CONNECTION_SHARES)]


def test_connections_that_never_release_hold_their_share_and_another_connection_is_served() -> None:
    async def scenario() -> None:
        budget = AnswerBudget(CAPACITY)
        hostile = [asyncio.ensure_future(budget.acquire(SHARE, f"never-reads-{n % 6}")) for n in range(60)]
        await _settle()
        assert sum(task.done() for task in hostile) == 6  # one answer per connection, the rest wait
        assert budget.in_use == 6 * SHARE and budget.connections == 6 and budget.waiting == 54
        reader = await asyncio.wait_for(budget.acquire(SHARE, "reader"), timeout=1)
        assert reader == SHARE
        budget.release(reader, "reader")
        assert budget.in_use == 6 * SHARE
        for task in hostile:
            task.cancel()
        await asyncio.gather(*hostile, return_exceptions=True)

    run(scenario())


def test_a_connection_waits_for_its_own_bytes_past_its_share() -> None:
    async def scenario() -> None:
        budget = AnswerBudget(CAPACITY)
        first = await budget.acquire(SHARE // 2, "a")
        second = await budget.acquire(SHARE // 2, "a")
        third = asyncio.ensure_future(budget.acquire(SHARE // 2, "a"))
        other = await budget.acquire(SHARE, "b")  # passes the waiter of a full connection
        await _settle()
        assert not third.done()
        budget.release(first, "a")
        assert await asyncio.wait_for(third, timeout=1) == SHARE // 2
        for size, connection in ((second, "a"), (SHARE // 2, "a"), (other, "b")):
            budget.release(size, connection)
        assert budget.in_use == 0 and budget.connections == 0

    run(scenario())


def test_a_reservation_is_at_most_a_connections_share() -> None:
    async def scenario() -> None:
        budget = AnswerBudget(CAPACITY)
        assert await budget.acquire(10 * CAPACITY, "greedy") == SHARE

    run(scenario())


def test_a_large_waiter_is_not_starved_by_smaller_ones_behind_it() -> None:
    async def scenario() -> None:
        budget, held = await _full_budget()
        large = asyncio.ensure_future(budget.acquire(SHARE, "large"))
        await _settle()
        small = asyncio.ensure_future(budget.acquire(1, "small"))
        await _settle()
        budget.release(1, "c0")  # room for the small one only: it stays behind the large one
        await _settle()
        assert not large.done() and not small.done()
        budget.release(held[1], "c1")
        assert await asyncio.wait_for(large, timeout=1) == SHARE
        budget.release(held[0] - 1, "c0")
        assert await asyncio.wait_for(small, timeout=1) == 1

    run(scenario())


def test_a_cancelled_waiter_gives_its_place_and_its_bytes_back() -> None:
    async def scenario() -> None:
        budget, held = await _full_budget()
        gone = asyncio.ensure_future(budget.acquire(SHARE, "gone"))
        behind = asyncio.ensure_future(budget.acquire(SHARE, "behind"))
        await _settle()
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        budget.release(held[0], "c0")
        assert await asyncio.wait_for(behind, timeout=1) == SHARE
        assert budget.waiting == 0 and budget.in_use == CAPACITY

    run(scenario())
