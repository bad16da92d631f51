"""courtier_durability_lag_seconds follows how long fetch results wait for the store."""

from __future__ import annotations

import asyncio

from courtier.crawl.committer import Committer
from courtier.crawl.worker import Worker
from courtier.sim.loop import LoopClock, run_virtual
from courtier.sim.run import SimCrawl, sim_config
from tests.sim.test_faults import SlowStore, small_web


def test_durability_lag_gauge_rises_while_the_store_stalls_and_returns_to_zero() -> None:
    async def go() -> None:
        crawl = SimCrawl(small_web(n_hosts=8, pages=30), sim_config(delay=0.2, concurrency=4))
        crawl.store = SlowStore(crawl.clock, start=5.0, end=6.0, stall=60.0)
        samples: list[tuple[float, float]] = []
        seen: list[Worker] = []

        async def watch(worker: Worker, clock: LoopClock) -> None:
            seen.append(worker)
            while True:
                value = worker.metrics.registry.get_sample_value(
                    "courtier_durability_lag_seconds")
                assert value is not None
                samples.append((clock.now() - clock.epoch, value))
                await asyncio.sleep(0.1)

        await crawl.run(during=watch)
        before = [v for t, v in samples if t < 5.0]
        during = [v for t, v in samples if 5.0 <= t < 66.0]
        assert before and max(before) <= 2.0          # commits every half second
        assert during and max(during) >= 55.0        # the hung commit's results waited
        final = seen[0].metrics.registry.get_sample_value("courtier_durability_lag_seconds")
        assert final == 0.0                           # everything durable at the end

    run_virtual(go())


class _Clock:
    def __init__(self, now: float) -> None:
        self._now = now

    def now(self) -> float:
        return self._now


def test_durability_lag_counts_the_batch_being_committed_and_the_pending_ones() -> None:
    from types import SimpleNamespace

    def lag(pending: list[float], flushing: float | None) -> float:
        committer = Committer(None, None, _Clock(100.0), None, None, None,  # type: ignore[arg-type]
                              lambda: None)
        committer.pending = [SimpleNamespace(fetched_at=t) for t in pending]  # type: ignore[misc]
        committer._flushing_from = flushing
        return committer.durability_lag()

    assert lag([], None) == 0.0
    assert lag([99.5, 98.0], None) == 2.0
    assert lag([99.5], 40.0) == 60.0        # a hung commit of results fetched at t=40
    assert lag([], 70.0) == 30.0
