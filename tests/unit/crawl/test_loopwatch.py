"""The loop-lag monitor sees a blocked loop and reports it in the metrics."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from courtier.crawl.loopwatch import LoopLagMonitor, log_tasks
from courtier.crawl.metrics import CrawlMetrics


async def test_a_blocking_call_shows_as_lag_in_the_metrics() -> None:
    metrics = CrawlMetrics()
    monitor = LoopLagMonitor(metrics, interval=0.01)
    monitor.start()
    await monitor.sampled.wait()
    monitor.sampled.clear()
    time.sleep(0.3)  # noqa: ASYNC251 (blocks the loop on purpose: the timer fires late)
    await monitor.sampled.wait()
    await monitor.stop()
    assert monitor.longest >= 0.29 - 0.01  # a lower bound only: lateness >= the block
    text = metrics.render().decode()
    assert "courtier_event_loop_lag_seconds_bucket" in text
    gauge = next(line for line in text.splitlines()
                 if line.startswith("courtier_event_loop_lag_max_seconds "))
    assert float(gauge.split()[1]) == monitor.longest


async def _parked_here(never: asyncio.Event) -> None:
    await never.wait()


async def test_the_task_list_names_each_task_and_the_await_it_is_parked_on(
        caplog: pytest.LogCaptureFixture) -> None:
    never = asyncio.Event()
    task = asyncio.create_task(_parked_here(never), name="parked-task")
    await asyncio.sleep(0)
    with caplog.at_level(logging.WARNING, logger="courtier.loop"):
        log_tasks()
    task.cancel()
    text = caplog.text
    assert "parked-task" in text
    assert "in _parked_here" in text and "await never.wait()" in text


def test_an_idle_crawl_is_sampled_every_idle_interval() -> None:
    """On a virtual clock: twenty samples a virtual second while busy, one while ``idle()``
    says the crawl only waits for retries. Seen red with ``idle`` ignored (200 samples in
    the idle ten seconds)."""
    from courtier.sim.loop import run_virtual

    async def go() -> tuple[int, int]:
        idle = [True]
        monitor = LoopLagMonitor(None, interval=0.05, idle=lambda: idle[0], idle_interval=1.0)
        monitor.start()
        await asyncio.sleep(10.0)
        idle_samples = monitor.samples
        idle[0] = False
        await asyncio.sleep(10.0)
        await monitor.stop()
        return idle_samples, monitor.samples - idle_samples

    idle_samples, busy_samples = run_virtual(go())
    assert 9 <= idle_samples <= 11
    assert busy_samples >= 190
