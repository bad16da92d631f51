"""The virtual loop's two orders (sim/loop.py): asyncio's, where a new task's first step
runs before a timer that fell due while the step creating it held the loop, and uvloop's
(``timers_first``), where the timer runs first (checked against uvloop itself, which a
real crawl runs on: crawl/app.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
import uvloop

from courtier.sim.loop import VirtualTimeLoop, run_virtual


async def _order(hold: Callable[[float], None]) -> list[str]:
    order: list[str] = []

    async def task() -> None:
        order.append("task")

    asyncio.get_running_loop().call_later(0.005, order.append, "timer")
    started = asyncio.create_task(task())
    hold(0.02)  # this step holds the loop past the timer
    await started
    await asyncio.sleep(0.01)
    return order


def _virtual_hold(seconds: float) -> None:
    loop = asyncio.get_running_loop()
    assert isinstance(loop, VirtualTimeLoop)
    loop.hold(seconds)


@pytest.mark.parametrize(("timers_first", "expected"),
                         [(False, ["task", "timer"]), (True, ["timer", "task"])])
def test_timers_first_runs_a_due_timer_before_a_new_tasks_first_step(
        timers_first: bool, expected: list[str]) -> None:
    assert run_virtual(_order(_virtual_hold), timers_first=timers_first) == expected


def test_uvloop_runs_a_due_timer_before_a_new_tasks_first_step() -> None:
    assert uvloop.run(_order(time.sleep)) == ["timer", "task"]
