"""The loop-lag monitor sees a blocked loop and reports it in the metrics."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

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


def _stall_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == "event_loop_stalled"]


async def _one_sample_after(monitor: LoopLagMonitor, block: Callable[[], None]) -> None:
    monitor.start()
    await monitor.sampled.wait()
    monitor.sampled.clear()
    block()
    await monitor.sampled.wait()
    await monitor.stop()


async def test_a_stall_spent_waiting_is_logged_as_waiting(
        caplog: pytest.LogCaptureFixture) -> None:
    monitor = LoopLagMonitor(None, interval=0.01, stall_after=0.2)
    with caplog.at_level(logging.WARNING, logger="courtier.loop"):
        await _one_sample_after(monitor, lambda: time.sleep(0.3))
    (line,) = _stall_lines(caplog)
    fields = line.event_fields  # type: ignore[attr-defined]
    assert fields["seconds"] >= 0.29 and fields["cpu_seconds"] < 0.15, fields
    assert "it waited" in line.getMessage() and monitor.stalls == 1


async def test_a_stall_spent_computing_counts_the_cpu_it_used(
        caplog: pytest.LogCaptureFixture) -> None:
    def spin() -> None:
        until = time.process_time() + 0.3
        while time.process_time() < until:
            pass

    monitor = LoopLagMonitor(None, interval=0.01, stall_after=0.2)
    with caplog.at_level(logging.WARNING, logger="courtier.loop"):
        await _one_sample_after(monitor, spin)
    (line,) = _stall_lines(caplog)
    fields = line.event_fields  # type: ignore[attr-defined]
    assert fields["seconds"] >= 0.29 and fields["cpu_seconds"] >= 0.29, fields


async def test_a_lag_under_the_threshold_is_not_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    monitor = LoopLagMonitor(None, interval=0.01, stall_after=30.0)
    with caplog.at_level(logging.WARNING, logger="courtier.loop"):
        await _one_sample_after(monitor, lambda: time.sleep(0.3))
    assert _stall_lines(caplog) == [] and monitor.stalls == 0
    assert monitor.longest >= 0.29
