"""Duplicates and sitemaps through the real worker in virtual time."""

from __future__ import annotations

import asyncio
import collections
import json
import statistics
from collections.abc import Sequence

from courtier.core.errors import StoreError
from courtier.dedup.payload_lookups import CALLER_TASK_NAME
from courtier.sim.loop import LoopClock, run_virtual
from courtier.sim.run import SimCrawl, sim_config, simulate
from courtier.sim.web import SimHost, SimWeb
from courtier.store.base import PayloadLocation
from courtier.store.memory import MemoryStore


def test_pages_listed_only_in_a_sitemap_are_crawled() -> None:
    web = SimWeb([SimHost("maps.sim", pages=3, sitemap_pages=12, cross_links=0)])
    report = simulate(web, sim_config(delay=0.5))
    assert report.violations == []
    fetched = {r.path for r in report.requests if r.status == 200}
    assert "/sitemap.xml" in fetched
    assert {f"/s/{i}" for i in range(12)} <= fetched


def test_mirrored_pages_become_revisits_and_keep_their_links() -> None:
    async def go() -> None:
        web = SimWeb([SimHost("origin.sim", pages=6, cross_links=0, robots_body=b""),
                      SimHost("mirror.sim", ip="192.0.2.2", pages=6, cross_links=0,
                              robots_body=b"", duplicate_of="origin.sim")])
        crawl = SimCrawl(web, sim_config(delay=0.5))
        report = await crawl.run()
        assert report.violations == []
        store = crawl.store
        assert isinstance(store, MemoryStore)
        events = await store.read_events(0, 1000)
        revisits = [e for e in events if e.payload["warc"] and e.payload["warc"]["revisit"]]
        # each page of one host is a byte-identical copy of the other's: one of each pair
        # is archived as a revisit record
        assert len(revisits) == 8
        by_host = collections.Counter(e.payload["url"].split("/")[2] for e in events
                                      if e.payload["outcome"] == "ok")
        # "/", six pages and /private/x (no robots rules here): links still followed
        assert by_host["origin.sim"] == by_host["mirror.sim"] == 8
        digests = {r["payload_digest"] for r in store.urls.values() if r["outcome"] == "ok"}
        assert len(digests) == 8

    run_virtual(go())


def test_daily_budget_caps_fetches_per_day() -> None:
    web = SimWeb([SimHost(f"b{i}.sim", ip=f"192.0.2.{i}", pages=20, cross_links=0)
                  for i in range(3)])
    one_shot = simulate(web, sim_config(delay=0.5, daily_budget=25))
    pages = [r for r in one_shot.requests if r.path != "/robots.txt"]
    assert len(pages) == 25
    assert one_shot.status.stop_reason == "daily budget spent"
    web = SimWeb([SimHost(f"c{i}.sim", ip=f"192.0.2.{i}", pages=20, cross_links=0)
                  for i in range(3)])
    continuous = simulate(web, sim_config(delay=0.5, daily_budget=25, continuous=True,
                                          max_seconds=1.5 * 24 * 3600))
    origin = min(r.start for r in continuous.requests)  # the budget window opens here
    starts = sorted(r.start for r in continuous.requests if r.path != "/robots.txt")
    first_day = [t for t in starts if t < origin + 24 * 3600]
    assert len(first_day) == 25 and len(starts) > 25  # the budget renews after 24 h


def test_sitemap_changefreq_is_the_recrawl_prior() -> None:
    async def go() -> None:
        web = SimWeb([SimHost("maps.sim", pages=3, sitemap_pages=4, cross_links=0,
                              sitemap_changefreq="monthly")])
        crawl = SimCrawl(web, sim_config(delay=0.5))
        await crawl.run()
        store = crawl.store
        assert isinstance(store, MemoryStore)
        rows = {r["url"].split("/", 3)[3]: r for r in store.urls.values()}
        assert rows["s/0"]["sitemap_changefreq"] == "monthly"
        assert rows["s/0"]["interval"] > 7 * 86_400 > rows["p/0"]["interval"]
        due = await store.due_within(range(1024), crawl.clock.now() + 2 * 86_400)
        assert 0 < due < len(rows)  # the monthly pages are not due within two days

    run_virtual(go())


def test_a_short_budget_goes_to_changing_pages_but_none_starves() -> None:
    web = SimWeb([SimHost("news.sim", ip="192.0.2.1", pages=30, cross_links=0, volatile=True),
                  SimHost("static.sim", ip="192.0.2.2", pages=10, cross_links=0)])
    days = 16
    report = simulate(web, sim_config(delay=1.0, daily_budget=20, continuous=True,
                                      max_seconds=days * 86_400.0))
    assert report.violations == []
    fetches = collections.Counter((r.host, r.path) for r in report.requests
                                  if r.path != "/robots.txt" and r.status == 200)
    news = [n for (host, _), n in fetches.items() if host == "news.sim"]
    static = [fetches[("static.sim", f"/p/{i}")] for i in range(10)]
    # the budget (20/day) is below what the changing host alone wants (31/day): it goes
    # mostly to pages seen changing at every visit ...
    assert statistics.median(news) >= 1.5 * statistics.median(static)
    # ... yet no page starves: the overdue guarantee brings every one back
    assert len(news) == 31 and min(news) >= 2 and min(static) >= 2


def test_recrawl_intervals_follow_known_change_rates_with_304s_and_the_budget() -> None:
    day = 86_400.0
    web = SimWeb([SimHost("rates.sim", pages=8, cross_links=0,
                          change_periods=(1 * day, 3 * day, 10 * day, 0.0))])
    budget = 100
    report = simulate(web, sim_config(delay=1.0, daily_budget=budget, continuous=True,
                                      max_seconds=8 * 7 * day))
    assert report.violations == []
    store = report.store
    assert isinstance(store, MemoryStore)
    interval = {r["url"].rsplit("/", 1)[1]: r["interval"] / day for r in store.urls.values()
                if "/p/" in r["url"]}
    # after eight weeks the estimated interval sits near each page's true period
    assert 0.9 <= interval["0"] <= 1.5          # changes daily (1 day is the floor)
    assert 3 / 2.5 <= interval["1"] <= 3 * 2.5  # every 3 days
    assert 10 / 2.5 <= interval["2"] <= 10 * 2.5
    assert interval["3"] >= 5                   # never: the interval keeps growing
    statuses = collections.Counter((r.path, r.status) for r in report.requests)
    assert statuses[("/p/3", 200)] == 1 and statuses[("/p/3", 304)] >= 5  # validators used
    assert statuses[("/p/0", 304)] == 0  # a page that changed every time never got one
    # the budget holds in every day window
    origin = min(r.start for r in report.requests)
    per_day = collections.Counter(int((r.start - origin) // day) for r in report.requests
                                  if r.path != "/robots.txt")
    assert max(per_day.values()) <= budget


def test_change_distance_decides_what_counts_as_a_change() -> None:
    def changes(distance: int | None) -> float:
        web = SimWeb([SimHost("ed.sim", pages=2, cross_links=0, volatile=True)])
        report = simulate(web, sim_config(delay=0.5, recrawl_interval=3600.0, continuous=True,
                                          max_seconds=3 * 86_400.0, change_distance=distance))
        store = report.store
        assert isinstance(store, MemoryStore)
        row = next(r for r in store.urls.values() if r["url"].endswith("/p/0"))
        stats = json.loads(row["change_stats"])
        assert stats["visits"] >= 2
        return float(stats["changes"]) / float(stats["visits"])

    assert changes(None) == 1.0  # new bytes at every visit: every visit is a change
    assert changes(64) == 0.0    # no SimHash can move more than 64 bits: never a change


class CountingStore(MemoryStore):
    """Records each batched payload lookup, answered after ``latency`` virtual seconds
    (a database's round trip); fails them all when ``failing``."""

    def __init__(self, clock: LoopClock, latency: float = 0.0, failing: bool = False) -> None:
        super().__init__(clock)
        self.latency = latency
        self.failing = failing
        self.batches: list[list[str]] = []

    async def payload_locations(self, digests: Sequence[str]) -> dict[str, PayloadLocation]:
        self.batches.append(list(digests))
        await asyncio.sleep(self.latency)  # virtual time: the round trip, not an ordering
        if self.failing:
            raise StoreError("payload index unreachable (simulated)")
        return await super().payload_locations(digests)


def test_payload_lookups_of_concurrent_fetches_share_store_calls() -> None:
    async def go() -> None:
        web = SimWeb([SimHost(f"h{i}.sim", ip=f"192.0.2.{i}", pages=6, latency=0.3)
                      for i in range(12)])
        crawl = SimCrawl(web, sim_config(delay=0.5))
        store = crawl.store = CountingStore(crawl.clock, latency=0.05)
        report = await crawl.run()
        assert report.violations == []
        asked = [d for batch in store.batches for d in batch]
        assert len(asked) == report.status.fetched == 12 * 7  # every page (distinct bodies)
        assert len(store.batches) < len(asked) and max(map(len, store.batches)) > 1
        assert not [t for t in asyncio.all_tasks() if t.get_name() == CALLER_TASK_NAME]

    run_virtual(go())


def test_failed_payload_lookups_archive_full_records_and_lose_no_page() -> None:
    async def go() -> None:
        web = SimWeb([SimHost("origin.sim", pages=6, cross_links=0, robots_body=b""),
                      SimHost("mirror.sim", ip="192.0.2.2", pages=6, cross_links=0,
                              robots_body=b"", duplicate_of="origin.sim")])
        crawl = SimCrawl(web, sim_config(delay=0.5))
        store = crawl.store = CountingStore(crawl.clock, failing=True)
        report = await crawl.run()
        assert report.violations == [] and store.batches
        events = [e for e in await store.read_events(0, 1000) if e.payload["outcome"] == "ok"]
        by_host = collections.Counter(e.payload["url"].split("/")[2] for e in events)
        assert by_host["origin.sim"] == by_host["mirror.sim"] == 8
        assert all(e.payload["warc"] for e in events)  # each page archived, as a record

    run_virtual(go())
