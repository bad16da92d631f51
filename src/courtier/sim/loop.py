"""An asyncio event loop whose clock is virtual.

When every task is waiting on a timer, the loop jumps straight to the next
timer instead of sleeping, so hours of simulated crawling take seconds and
runs are deterministic. Real I/O still works (a ready file descriptor is
served first; with no timer pending the loop blocks for real), but code run
in the simulator should avoid threads, whose completion time would not be
virtual.
"""

from __future__ import annotations

import asyncio
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
    """``loop.time()`` is virtual seconds since the loop was created."""

    def __init__(self) -> None:
        self._jumping = _JumpingSelector()
        super().__init__(selector=self._jumping)
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self._jumping.virtual_time


class LoopClock:
    """A :class:`~courtier.core.clock.Clock` reading the running virtual loop's time."""

    def __init__(self, epoch: float = 1_700_000_000.0) -> None:
        self.epoch = epoch

    def now(self) -> float:
        return self.epoch + asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


def run_virtual(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on a fresh :class:`VirtualTimeLoop`."""
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()
