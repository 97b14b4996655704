"""Long polls parked per bucket (server/replica/fetch_waiters.py): a produce wakes only the polls
on its bucket, no wake-up is lost between a poll's read and its parking, and the cap holds; a
replica stream's fetch parks in its thread under the same rules."""

from __future__ import annotations

import asyncio
import threading
import time

from lakelog.server.replica.fetch_waiters import FetchWaiters

QUIET = (7, 0)
BUSY = (7, 1)
OTHER_TABLE = (8, 0)


async def _settle() -> None:
    """Let the loop run what notify() scheduled on it."""
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_produce_wakes_only_the_polls_on_its_bucket() -> None:
    async def walk() -> None:
        waiters = FetchWaiters(max_parked=10)
        quiet = asyncio.create_task(waiters.park([QUIET], waiters.arrivals(), 60))
        busy = asyncio.create_task(waiters.park([BUSY, OTHER_TABLE], waiters.arrivals(), 60))
        await _settle()
        assert waiters.parked == 2
        for _ in range(3):
            waiters.notify(BUSY)
        await _settle()
        assert busy.done() and await busy is True
        assert not quiet.done(), "a produce on another bucket woke a poll parked on a quiet one"
        assert waiters.parked == 1
        waiters.notify(QUIET)
        await _settle()
        assert quiet.done() and waiters.parked == 0

    asyncio.run(walk())


def test_an_arrival_between_read_and_park_is_not_lost() -> None:
    async def walk() -> None:
        waiters = FetchWaiters(max_parked=10)
        seen = waiters.arrivals()  # the poll reads after this ...
        waiters.notify(OTHER_TABLE)
        waiters.notify(BUSY)  # ... and data arrives on its bucket before it parks
        assert await asyncio.wait_for(waiters.park([BUSY], seen, 60), 5) is True
        assert waiters.parked == 0
        other = asyncio.create_task(waiters.park([QUIET], seen, 60))  # OTHER_TABLE's arrival is not its own
        await _settle()
        assert not other.done()
        waiters.close()
        await _settle()
        assert other.done()

    asyncio.run(walk())


def test_over_the_cap_a_poll_is_not_parked_and_a_closing_server_parks_none() -> None:
    async def walk() -> None:
        waiters = FetchWaiters(max_parked=1)
        first = asyncio.create_task(waiters.park([QUIET], waiters.arrivals(), 60))
        await _settle()
        assert await waiters.park([BUSY], waiters.arrivals(), 60) is False
        waiters.close()
        await _settle()
        assert first.done()
        assert await asyncio.wait_for(waiters.park([QUIET], waiters.arrivals(), 60), 5) is True

    asyncio.run(walk())



def _park_in_thread(waiters: FetchWaiters, keys: list[tuple[int, int]], seen: int) -> tuple[threading.Thread, list[bool]]:
    answered: list[bool] = []
    thread = threading.Thread(target=lambda: answered.append(waiters.park_thread(keys, seen, 60)))
    thread.start()
    return thread, answered


def _until_parked(waiters: FetchWaiters, count: int) -> None:
    deadline = time.monotonic() + 10
    while waiters.parked < count:
        assert time.monotonic() < deadline, f"{count} polls never parked"
        time.sleep(0.001)


def test_a_thread_parked_beside_a_coroutine_is_woken_by_its_own_bucket_only() -> None:
    async def walk() -> None:
        waiters = FetchWaiters(max_parked=10)
        on_loop = asyncio.create_task(waiters.park([BUSY], waiters.arrivals(), 60))
        thread, answered = _park_in_thread(waiters, [QUIET], waiters.arrivals())
        await asyncio.to_thread(_until_parked, waiters, 2)
        waiters.notify(BUSY)
        await _settle()
        assert on_loop.done() and not answered, "a produce on another bucket woke the thread parked on a quiet one"
        waiters.notify(QUIET)
        await asyncio.to_thread(thread.join, 10)
        assert answered == [True] and waiters.parked == 0

    asyncio.run(walk())


def test_a_parked_thread_counts_against_the_cap_and_a_closing_server_wakes_it() -> None:
    waiters = FetchWaiters(max_parked=1)
    thread, answered = _park_in_thread(waiters, [QUIET], waiters.arrivals())
    _until_parked(waiters, 1)
    assert waiters.park_thread([BUSY], waiters.arrivals(), 60) is False
    waiters.close()
    thread.join(10)
    assert answered == [True], "close() left a thread parked"
    fresh = FetchWaiters(max_parked=1)
    seen = fresh.arrivals()
    fresh.notify(BUSY)
    assert fresh.park_thread([BUSY], seen, 60) is True, "an arrival between a read and parking was lost"
