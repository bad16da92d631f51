"""A few threads whose calls each get a time budget from their own start
(:class:`BudgetedThreads`).

A parse handed to a thread used to get its budget from the hand-off: under load (two
threads, 64 fetches finishing together, a loop held for seconds) ordinary pages that
parse in milliseconds waited for a thread past the budget and were kept without links
(the one-worker PostgreSQL crawl of the realistic web at load 15-18: 38 pages). Here:

* a call that has started gets ``budget`` seconds from its start in the thread;
* a call still waiting for a thread waits while the threads make progress (a call
  started or ended within the last ``budget`` seconds); when they have made none for
  that long, every thread is stuck in an overrun, and the waiting call is given up too
  (withdrawn: it never runs);
* a call whose result is there when its budget is looked at is taken, even when the
  loop looks late (a loop held past the deadline used to drop finished parses).

Times are ``time.monotonic()``, the clock of the loop's timers and of the threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["BudgetedThreads"]


class BudgetedThreads:
    """``await threads.call(fn, *args)``: ``(start, fn(*args))``, or None when the
    budget ran out (see the module docstring)."""

    def __init__(self, threads: int, budget: float,
                 initializer: Callable[[], None] | None = None,
                 name: str = "courtier-thread") -> None:
        self.budget = budget
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix=name, initializer=initializer)
        #: when a call last started or ended in a thread (written by the threads)
        self._progress = time.monotonic()

    def _run(self, started: list[float], fn: Callable[..., T], args: tuple[Any, ...]
             ) -> tuple[float, T]:
        begun = time.monotonic()
        started.append(begun)
        self._progress = begun
        try:
            return begun, fn(*args)
        finally:
            self._progress = time.monotonic()

    def _deadline(self, started: list[float], handed: float) -> float:
        if started:
            return started[0] + self.budget
        return max(self._progress, handed) + self.budget

    async def call(self, fn: Callable[..., T], *args: Any) -> tuple[float, T] | None:
        handed = time.monotonic()
        started: list[float] = []
        work = self._pool.submit(self._run, started, fn, args)
        waiter = asyncio.wrap_future(work)
        waiter.add_done_callback(_retrieved)
        try:
            while not work.done():
                left = self._deadline(started, handed) - time.monotonic()
                if left <= 0:
                    break
                await asyncio.wait({waiter}, timeout=left)
        except BaseException:
            work.cancel()  # the caller is gone: a call not started never runs
            raise
        if work.done():
            return work.result()  # its exception, if the call raised one
        work.cancel()  # waiting for a thread while none progressed: withdrawn
        return None

    def close(self) -> None:
        """Stop the pool without waiting for a call still running in a thread."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def _retrieved(future: asyncio.Future[Any]) -> None:
    """The loop's copy of a call's outcome is read from the thread's future instead: mark
    its exception as retrieved (no "never retrieved" warning)."""
    if not future.cancelled():
        future.exception()
