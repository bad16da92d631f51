"""Thread calls get their budget from their own start (parse/thread_budget.py).

The one-worker PostgreSQL crawl of the realistic web at load 15-18 kept 38 ordinary
pages without links: "parse exceeded 10.0 s in a thread", although each parses in
milliseconds. They had waited for one of the two threads, or the loop had been held
past their deadline while their result was ready."""

from __future__ import annotations

import asyncio
import threading
import time

from courtier.parse.thread_budget import BudgetedThreads


def _slow(seconds: float) -> str:
    time.sleep(seconds)  # a parse that takes this long (a stand-in, in the thread)
    return "slow"


def _hold_the_loop(done: threading.Event, past: float) -> None:
    """Hold the calling loop (as a busy machine does) until the call has ended in its
    thread, then ``past`` seconds more: past the call's deadline."""
    done.wait()
    time.sleep(past)


async def test_the_wait_for_a_busy_thread_is_not_counted_in_the_budget() -> None:
    """One thread, five calls handed off together: four take 0.3 budgets each, so the
    last one starts 1.2 budgets after its hand-off; each still gets its answer.

    Seen red with the budget counted from the hand-off (``_deadline`` returning
    ``handed + budget``): the fifth call (and the fourth) came back None."""
    budget = 2.0
    threads = BudgetedThreads(1, budget)
    try:
        calls = [threads.call(_slow, 0.3 * budget) for _ in range(4)]
        calls.append(threads.call(str.upper, "probe"))
        results = await asyncio.gather(*calls)
    finally:
        threads.close()
    assert [r is not None and r[1] for r in results] == ["slow"] * 4 + ["PROBE"]
    starts = [r[0] for r in results if r is not None]
    assert starts[-1] - starts[0] >= 0.9 * budget  # the probe did wait that long


async def test_a_call_waiting_behind_a_thread_stuck_in_an_overrun_is_withdrawn() -> None:
    """The only thread never ends its call: that call is given up after its budget, and
    the call waiting behind it too (the threads made no progress for a budget); the
    waiting call never runs, even once the thread is free again."""
    threads = BudgetedThreads(1, 0.2)
    release = threading.Event()
    ran: list[str] = []
    try:
        stuck = threads.call(release.wait)
        waiting = threads.call(ran.append, "ran")
        assert await asyncio.gather(stuck, waiting) == [None, None]
    finally:
        release.set()
        threads.close()
        threads._pool.shutdown(wait=True)  # the stuck call ends; nothing else runs
    assert ran == []


async def test_a_result_ready_when_a_held_loop_looks_late_is_taken() -> None:
    """The call ends in its thread well within its budget, but the loop is held past the
    deadline before it sees the answer: the answer is used, not dropped.

    Seen red with the earlier ``asyncio.timeout`` around the await: the timer and the
    answer came due in the same loop iteration and the call came back None."""
    budget = 0.2
    threads = BudgetedThreads(1, budget)
    done = threading.Event()

    def quick() -> str:
        done.set()
        return "parsed"

    try:
        task = asyncio.create_task(threads.call(quick))
        await asyncio.sleep(0)  # handed off; the task waits for its answer
        _hold_the_loop(done, budget * 1.5)
        result = await task
    finally:
        threads.close()
    assert result is not None and result[1] == "parsed"
