"""A slow refill does not hold up the fetches while the frontier holds work (worker.py's
turn waits ``REFILL_INLINE`` for a refill only when fewer URLs than the concurrency are in
memory).

The store's ``read_due`` takes ``STALL`` virtual seconds once the frontier holds work, and
``REFILL_INLINE`` is raised to the same: a turn that waited for such a refill would start
nothing for that long. The sim web's observer (an independent log of request starts)
must show requests starting inside every stalled refill, and the crawl still completes.
"""

from __future__ import annotations

import asyncio

import pytest

from courtier.crawl import worker as worker_module
from courtier.crawl.worker import Worker
from courtier.sim.loop import run_virtual
from courtier.sim.run import SimCrawl, sim_config
from courtier.sim.web import SimHost, SimWeb
from tests.sim.test_faults import allowed, page_counts
from tests.sim.test_refill_pacing import RefillWatch

CONCURRENCY = 4
STALL = 5.0


class SlowRefills(RefillWatch):
    def __init__(self, crawl: SimCrawl) -> None:
        super().__init__(crawl)
        self.stalls: list[tuple[float, float]] = []  # (start, end) virtual seconds

    async def before_refill(self, worker: Worker) -> None:
        if worker.frontier.queued >= CONCURRENCY:
            began = self.crawl.clock.now()
            await asyncio.sleep(STALL)
            self.stalls.append((began, self.crawl.clock.now()))


def test_fetches_go_on_while_a_slow_refill_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "REFILL_INLINE", STALL)

    async def go() -> None:
        web = SimWeb([SimHost(f"h{i}.sim", ip=f"192.0.2.{i}", pages=30, latency=0.2)
                      for i in range(8)])
        crawl = SimCrawl(web, sim_config(delay=0.3, concurrency=CONCURRENCY))
        store = SlowRefills(crawl)
        crawl.store = store
        report = await crawl.run(during=store.watch)
        assert report.violations == []
        assert set(page_counts(crawl)) == allowed(web)
        assert store.stalls, "no refill ran while the frontier held work"
        starts = sorted(r.start for r in crawl.observer.requests)
        for began, ended in store.stalls:
            inside = [t for t in starts if began < t < ended]
            assert inside, f"no request started during the refill of {began:.2f}–{ended:.2f}"

    run_virtual(go())
