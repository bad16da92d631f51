"""An asyncio event loop whose clock is virtual.

When every task is waiting on a timer, the loop jumps straight to the next
timer instead of sleeping, so hours of simulated crawling take seconds and
runs are deterministic. Real I/O still works (a ready file descriptor is
served first; with no timer pending the loop blocks for real), but code run
in the simulator should avoid threads, whose completion time would not be
virtual.

Timers and callbacks: asyncio's own loop runs the timers that fell due after the
callbacks already queued (``call_soon``: a new task's first step among them); uvloop,
which a real crawl runs on (crawl/app.py), runs them before, in libuv's timers phase. A
step that holds the loop past a timer therefore has that timer run before the first
step of any task it created under uvloop, not under asyncio. ``timers_first=True``
gives the virtual loop uvloop's order.
"""

from __future__ import annotations

import asyncio
import heapq
import selectors
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


class _JumpingSelector(selectors.BaseSelector):
    """Wraps a real selector; a wait with a timeout advances virtual time instead."""

    def __init__(self) -> None:
        self._real = selectors.DefaultSelector()
        self.virtual_time = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._real.select(0)
        if ready:
            return ready
        if timeout is None:
            return self._real.select(None)
        if timeout > 0:
            self.virtual_time += timeout
        return []

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """``loop.time()`` is virtual seconds since the loop was created; ``timers_first``:
    timers due run before the callbacks queued meanwhile (uvloop's order, module
    docstring)."""

    def __init__(self, timers_first: bool = False) -> None:
        self._jumping = _JumpingSelector()
        super().__init__(selector=self._jumping)
        self._clock_resolution = 1e-9
        self._timers_first = timers_first

    def time(self) -> float:
        return self._jumping.virtual_time

    def hold(self, seconds: float) -> None:
        """The loop is held for ``seconds`` by the code running now (a CPU-bound step, a
        starved machine): virtual time passes and nothing else runs meanwhile."""
        self._jumping.virtual_time += seconds

    def _run_once(self) -> None:
        if self._timers_first:
            # libuv's timers phase: the timers due now go ahead of what call_soon queued
            end = self.time() + self._clock_resolution
            due: list[asyncio.TimerHandle] = []
            scheduled: list[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
            while scheduled and scheduled[0].when() < end:
                handle = heapq.heappop(scheduled)
                handle._scheduled = False  # type: ignore[attr-defined]
                if handle.cancelled():
                    self._timer_cancelled_count -= 1  # type: ignore[attr-defined]
                else:
                    due.append(handle)
            self._ready.extendleft(reversed(due))  # type: ignore[attr-defined]
        super()._run_once()  # type: ignore[misc]


class LoopClock:
    """A :class:`~courtier.core.clock.Clock` reading the running virtual loop's time."""

    def __init__(self, epoch: float = 1_700_000_000.0) -> None:
        self.epoch = epoch

    def now(self) -> float:
        return self.epoch + asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


def run_virtual(coro: Coroutine[Any, Any, T], timers_first: bool = False) -> T:
    """Run ``coro`` to completion on a fresh :class:`VirtualTimeLoop` (``timers_first``:
    in uvloop's order, module docstring)."""
    loop = VirtualTimeLoop(timers_first)
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()
