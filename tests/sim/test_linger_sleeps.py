"""A one-shot crawl lingering for a robots.txt retry sleeps until it is due, and counts
how long it waited and for what (the final line says so: crawl/progress.py).

One host answers at once; the other's robots.txt answers 503 for its first 100 virtual
seconds, so a polite crawler fetches nothing else there and retries robots.txt later
(60 s, then 120 s: ``RobotsPolicy``). Between two attempts nothing can happen (the
simulation has ``idle_poll`` = 600 s: nothing arrives from outside), and the store's
refills and end looks, counted by a wrapper, show how often the worker woke. It used to
wake every ``COMMIT_EVERY`` (0.5 s) for a refill and a look: ~240 refills for the two
minutes of waiting. The observer's log (the simulated server's) says when robots.txt was
asked for.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence

from courtier.sim.loop import run_virtual
from courtier.sim.run import SimCrawl, sim_config
from courtier.sim.web import SimHost, SimWeb
from courtier.store.base import DueUrl
from courtier.store.memory import MemoryStore
from tests.sim.test_faults import allowed, page_counts


class CountedRefills(MemoryStore):
    """A memory store that notes the virtual time of every refill."""

    def __init__(self, crawl: SimCrawl) -> None:
        super().__init__(crawl.clock)
        self.crawl = crawl
        self.refills: list[float] = []

    async def read_due(self, shards: Sequence[int], now: float, limit: int,
                       per_host_limit: int, skip_hosts: Collection[str] = (),
                       epochs: Mapping[int, int] | None = None) -> list[DueUrl]:
        self.refills.append(self.crawl.clock.now())
        return await super().read_due(shards, now, limit, per_host_limit, skip_hosts, epochs)


def test_a_lingering_crawl_sleeps_until_the_retry_and_says_what_it_waited_for() -> None:
    """Seen red with the pacer forgetting when the retry is due after each wait (the
    refills came every 0.5 s: 110 in the first wait alone) and with the wait not counted
    (waited 0)."""

    async def go() -> None:
        web = SimWeb([SimHost("fine.sim", ip="192.0.2.1", pages=3, cross_links=0),
                      SimHost("late.sim", ip="192.0.2.2", pages=3, cross_links=0,
                              robots_fail_until=100.0)])
        crawl = SimCrawl(web, sim_config(delay=0.5, linger=300.0))
        store = CountedRefills(crawl)
        crawl.store = store
        started = crawl.clock.now()
        report = await crawl.run()
        assert report.violations == []
        assert set(page_counts(crawl)) == allowed(web)  # the late host was crawled too
        robots = [r.start for r in report.requests
                  if r.host == "late.sim" and r.path == "/robots.txt"]
        assert len(robots) >= 3  # two 503 answers, then the file
        fine_done = max(r.end for r in report.requests if r.host == "fine.sim")
        waits = list(itertools.pairwise(robots))
        for begin, end in waits:  # once the other host is done, only the retry is due
            woke = [t for t in store.refills if max(begin, fine_done) + 1.0 < t < end - 1.0]
            assert len(woke) <= 2, (end - begin, woke)
        asleep = sum(end - begin for begin, end in waits)
        status = report.status
        assert asleep - 5.0 <= status.waited <= asleep, (status.waited, robots)
        assert status.waited_for == "1 host (robots.txt unreachable: 1 [http_503 1])"
        assert report.virtual_seconds >= robots[-1] - started

    run_virtual(go())
