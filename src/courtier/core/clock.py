"""Time as an injected dependency.

The scheduler, politeness and recrawl logic read time only through a
:class:`Clock`, so the simulator can drive the same code with virtual time.
Times are POSIX seconds (float) so that they can be stored and compared
across processes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """A source of time.

    ``now()`` never goes backwards for one clock instance. ``sleep(s)``
    returns after at least ``s`` seconds of this clock's time have passed.
    """

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """Wall-clock time, made monotonic so that a clock step cannot reorder events."""

    __slots__ = ("_offset",)

    def __init__(self) -> None:
        self._offset = time.time() - time.monotonic()

    def now(self) -> float:
        return time.monotonic() + self._offset

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class VirtualClock:
    """Manually advanced time for tests and the simulator.

    ``sleep`` advances the clock itself (a single-threaded discrete-event
    driver owns the clock), so code under test never waits for real time.
    """

    __slots__ = ("_now",)

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self._now += seconds

    def set(self, when: float) -> None:
        if when < self._now:
            raise ValueError("a clock cannot go backwards")
        self._now = when

    async def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))
        await asyncio.sleep(0)
