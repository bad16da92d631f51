"""Refills come every REFILL_EVERY while the frontier runs short, every REFILL_CALM while
it holds ample work (worker_refill.py), and the crawl still fetches everything.

The store records, at every ``read_due``, the virtual time and how many URLs the
worker's frontier held: that is what the worker decided the interval from.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence

from courtier.crawl.refiller import REFILL_AMPLE, REFILL_CALM, REFILL_EVERY
from courtier.crawl.worker import Worker
from courtier.sim.loop import run_virtual
from courtier.sim.run import SimCrawl, sim_config
from courtier.sim.web import SimHost, SimWeb
from courtier.store.base import DueUrl
from courtier.store.memory import MemoryStore
from tests.sim.test_faults import allowed, page_counts

CONCURRENCY = 4


class RefillWatch(MemoryStore):
    """A memory store that calls :meth:`before_refill` with the crawl's worker at every
    ``read_due`` (once :meth:`watch`, the crawl's ``during`` hook, has seen the worker)."""

    def __init__(self, crawl: SimCrawl) -> None:
        super().__init__(crawl.clock)
        self.crawl = crawl
        self.worker: Worker | None = None

    async def watch(self, worker: Worker, _clock: object) -> None:
        self.worker = worker

    async def before_refill(self, worker: Worker) -> None:
        """What the test does at a refill, before the store answers it."""

    async def read_due(self, shards: Sequence[int], now: float, limit: int,
                       per_host_limit: int, skip_hosts: Collection[str] = (),
                       epochs: Mapping[int, int] | None = None) -> list[DueUrl]:
        if self.worker is not None:
            await self.before_refill(self.worker)
        return await super().read_due(shards, now, limit, per_host_limit, skip_hosts, epochs)


class TimedRefills(RefillWatch):
    def __init__(self, crawl: SimCrawl) -> None:
        super().__init__(crawl)
        self.calls: list[tuple[float, int]] = []  # (time, URLs queued in memory)

    async def before_refill(self, worker: Worker) -> None:
        self.calls.append((self.crawl.clock.now(), worker.frontier.queued))


def test_refills_slow_down_while_the_frontier_holds_ample_work() -> None:
    async def go() -> None:
        web = SimWeb([SimHost(f"h{i}.sim", ip=f"192.0.2.{i}", pages=40, latency=0.3)
                      for i in range(12)])
        crawl = SimCrawl(web, sim_config(delay=0.5, concurrency=CONCURRENCY))
        store = TimedRefills(crawl)
        crawl.store = store
        report = await crawl.run(during=store.watch)
        assert report.violations == []
        counts = page_counts(crawl)
        assert set(counts) == allowed(web)
        ample = REFILL_AMPLE * CONCURRENCY
        gaps = [(t1 - t0, q1) for (t0, _), (t1, q1) in itertools.pairwise(store.calls)]
        calm = [gap for gap, queued in gaps if queued >= ample]
        short = [gap for gap, queued in gaps if queued < ample]
        assert calm and short  # the crawl went through both regimes
        assert min(calm) >= REFILL_CALM - 1e-6
        assert min(short) >= REFILL_EVERY - 1e-6
        assert min(short) < REFILL_CALM  # short of work, it refilled sooner

    run_virtual(go())
