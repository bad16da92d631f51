"""The loop-lag monitor sees a blocked loop and reports it in the metrics."""

from __future__ import annotations

import time

from courtier.loopwatch import LoopLagMonitor
from courtier.metrics import CrawlMetrics


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
