"""The two signals of a worker's loop (:class:`LoopSignals`): a stop was asked, and
something happened that the loop should look at now (a fetch or a commit ended, a refill
arrived, seeds or a policy came in from outside).

Owns: the two events and the reason of the stop. The loop waits on ``wakeup`` between
turns (one event instead of ``asyncio.wait`` over every task: O(1) per wait).
"""

from __future__ import annotations

import asyncio


class LoopSignals:
    """Stop and wake-up events of one loop."""

    def __init__(self) -> None:
        self._stop = asyncio.Event()
        self.wakeup = asyncio.Event()

    def wake(self) -> None:
        """Run the loop now instead of at its next tick."""
        self.wakeup.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> bool:
        """Ask the loop to stop; False when a stop was asked already."""
        if self._stop.is_set():
            return False
        self._stop.set()
        self.wakeup.set()
        return True
