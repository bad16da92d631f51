"""An idle worker's look for the crawl's end takes a bounded share of its idle time.

The look scans rows of the store (seconds on a large one), and an idle worker asks
again at every turn. The pacer's :class:`~courtier.crawl.pacer.ShareGate` holds the next
look back for the last look's cost divided by ``END_CHECK_SHARE``. A virtual clock that
the look itself advances stands in for a slow store; the count of looks is the observer.
(Checked: with the gate's hold-back removed the first test fails.)
"""

from __future__ import annotations

from courtier.core.clock import VirtualClock
from courtier.crawl.pacer import END_CHECK_SHARE, ShareGate


class Looks:
    """A look that takes ``cost`` seconds of the clock and answers ``answer``."""

    def __init__(self, cost: float, answer: bool = False) -> None:
        self.clock = VirtualClock()
        self.gate = ShareGate(self.clock, END_CHECK_SHARE)
        self.cost, self.answer, self.looks = cost, answer, 0

    async def look(self, now: float) -> bool:
        self.looks += 1
        self.clock.advance(self.cost)
        return self.answer

    async def nothing_due(self, now: float) -> bool:
        return await self.gate.ask(now, self.look)


async def test_a_slow_look_waits_its_cost_over_the_share_before_the_next() -> None:
    worker = Looks(cost=2.0)
    first = worker.clock.now()
    assert await worker.nothing_due(first) is False
    hold = 2.0 / END_CHECK_SHARE
    worker.clock.set(first + hold - 0.5)
    assert await worker.nothing_due(worker.clock.now()) is False
    assert worker.looks == 1  # held back: no look, no answer of "done"
    worker.clock.set(first + hold)
    await worker.nothing_due(worker.clock.now())
    assert worker.looks == 2


async def test_a_look_that_costs_nothing_is_never_held_back() -> None:
    worker = Looks(cost=0.0)
    for _ in range(3):
        await worker.nothing_due(worker.clock.now())
    assert worker.looks == 3


async def test_the_answer_of_a_look_is_passed_on() -> None:
    worker = Looks(cost=1.0, answer=True)
    assert await worker.nothing_due(worker.clock.now()) is True
