"""The refill reads without marking: what the worker holds is skipped, or fetched twice.

``read_due`` leaves every row it returns QUEUED at its version, so a second read returns
the same rows again unless their hosts are in its ``skip_hosts``. The worker passes
every host of which it holds anything (``Refiller.held_hosts``): URLs queued in the
frontier, a fetch in flight, a result pending or in the commit under way (until the
store acknowledges it), a back-off or a long wait. Each test below breaks one of those
on a scratch copy and shows what the sim web's own log (the observer) then sees; the
worker's counters are not asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence

from courtier.sim.loop import run_virtual
from courtier.sim.run import SimCrawl, sim_config
from courtier.sim.web import SimHost, SimWeb
from courtier.store.base import CommitResult, DueUrl, FetchCommit, HostStatsDelta
from courtier.store.memory import MemoryStore
from tests.sim.test_faults import allowed, one_event_per_url_version, page_counts, small_web


def test_urls_queued_in_memory_are_not_read_again() -> None:
    """Hosts with more pages than one refill hands over at a 0.5 s delay: refills come
    every 0.25-1 s while their URLs wait in the frontier. Seen red with the frontier's
    queued hosts left out of ``holding_hosts``: one URL fetched 3,005 times."""

    async def go() -> None:
        web = small_web(n_hosts=4, pages=10)
        crawl = SimCrawl(web, sim_config(delay=0.5))
        report = await crawl.run()
        counts = page_counts(crawl)
        assert set(counts) == allowed(web)
        assert max(counts.values()) == 1, sorted(k for k, n in counts.items() if n > 1)
        assert report.violations == []
        await one_event_per_url_version(crawl.store)  # type: ignore[arg-type]

    run_virtual(go())


class SlowCommitRace(MemoryStore):
    """A commit is applied ``COMMIT_TIME`` after it is sent; a read that looks while a
    commit is under way answers ``READ_TIME`` after it looked, so once that commit is
    acknowledged, with the rows as they were before it."""

    COMMIT_TIME = 0.3
    READ_TIME = 0.6

    def __init__(self, crawl: SimCrawl) -> None:
        super().__init__(crawl.clock)
        self.committing = 0
        self.reads_over_a_commit = 0

    async def commit(self, commits: Sequence[FetchCommit],
                     host_stats: Sequence[HostStatsDelta] = ()) -> CommitResult:
        self.committing += 1
        try:
            await asyncio.sleep(self.COMMIT_TIME)
            return await super().commit(commits, host_stats)
        finally:
            self.committing -= 1

    async def read_due(self, shards: Sequence[int], now: float, limit: int,
                       per_host_limit: int, skip_hosts: Collection[str] = (),
                       epochs: Mapping[int, int] | None = None) -> list[DueUrl]:
        due = await super().read_due(shards, now, limit, per_host_limit, skip_hosts, epochs)
        if self.committing:
            self.reads_over_a_commit += 1
            await asyncio.sleep(self.READ_TIME)
        return due


def test_a_host_whose_commit_is_under_way_is_skipped_until_it_is_acknowledged() -> None:
    """Seen red with the batch of the commit under way left out of
    ``Committer.held_hosts`` (only the pending results counted): URLs fetched twice
    (h0.sim's / and /p/2, h1.sim's / and /p/1, …), each read before its commit applied
    and handed to the frontier after."""

    async def go() -> None:
        web = SimWeb([SimHost(f"h{i}.sim", ip=f"192.0.2.{i}", pages=3, latency=0.05,
                              links_per_page=2)
                      for i in range(12)])
        crawl = SimCrawl(web, sim_config(delay=0.2, host_window=2))
        store = SlowCommitRace(crawl)
        crawl.store = store
        report = await crawl.run()
        assert store.reads_over_a_commit > 0
        assert report.status.stop_reason == "nothing due"
        counts = page_counts(crawl)
        assert set(counts) == allowed(web)
        assert max(counts.values()) == 1, sorted(k for k, n in counts.items() if n > 1)
        assert report.violations == []
        await one_event_per_url_version(store)

    run_virtual(go())


class ReadLog(MemoryStore):
    """Notes the hosts of the rows every read returns, with the virtual time."""

    def __init__(self, crawl: SimCrawl) -> None:
        super().__init__(crawl.clock)
        self.clock = crawl.clock
        self.reads: list[tuple[float, set[str]]] = []

    async def read_due(self, shards: Sequence[int], now: float, limit: int,
                       per_host_limit: int, skip_hosts: Collection[str] = (),
                       epochs: Mapping[int, int] | None = None) -> list[DueUrl]:
        due = await super().read_due(shards, now, limit, per_host_limit, skip_hosts, epochs)
        self.reads.append((self.clock.now(), {d.host_key for d in due}))
        return due


def test_a_host_in_a_long_back_off_is_not_waited_for() -> None:
    """One host answers its first page and then 503 with ``Retry-After: 3600``: its
    URLs go back to the store due when the back-off ends (``Store.postpone``), and with
    ``--linger 60`` the crawl ends without waiting an hour for them. Seen red with the
    postponement not sent (the crawl waited the hour out: the host fetched again at
    3,601 s), and with such hosts kept in the skip set (rows of the host that links
    added during the back-off stayed due now: the same hour waited out)."""

    async def go() -> None:
        hosts = [SimHost(f"h{i}.sim", ip=f"192.0.2.{i}", pages=6, latency=0.1)
                 for i in range(3)]
        hosts.append(SimHost("busy.sim", ip="192.0.2.9", pages=6, latency=0.1,
                             failure_rate=1.0, failures_after=1, retry_after="3600"))
        web = SimWeb(hosts)
        crawl = SimCrawl(web, sim_config(delay=0.5, linger=60.0))
        store = ReadLog(crawl)
        crawl.store = store
        report = await crawl.run()
        busy = [r for r in crawl.observer.requests
                if r.host == "busy.sim" and r.path != "/robots.txt"]
        assert len(busy) == 2, [(r.start, r.path) for r in busy]  # the page, then a 503
        refused_at = busy[1].start
        assert report.status.stop_reason == "nothing due"
        assert max(r.start for r in crawl.observer.requests) < refused_at + 3000
        assert report.violations == []
        left = [row for row in store.urls.values()
                if row["host_key"] == "http://busy.sim" and row["version"] == 0]
        assert left and all(row["next_fetch_at"] >= refused_at + 3000 for row in left)

    run_virtual(go())
