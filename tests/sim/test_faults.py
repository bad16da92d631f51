"""Fault injection on the real worker in virtual time (DESIGN.md §1.4, issue 4).

Each test breaks one thing on purpose — the store, the archive, the process,
shard ownership, robots.txt, DNS — and checks the promises: nothing lost,
nothing emitted twice, politeness kept.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Sequence

from courtier.archive.warc import ArchivedRecord
from courtier.core.errors import ArchiveError, StoreError
from courtier.crawl.worker import SHARD_LEASE, Worker
from courtier.fetch.transport import FetchResponse
from courtier.sim.archive import DigestOnlyArchive
from courtier.sim.dns import PRIVATE_ADDRESS, SIM_TTL
from courtier.sim.loop import LoopClock, run_virtual
from courtier.sim.run import SimCrawl, sim_config
from courtier.sim.web import SimHost, SimWeb
from courtier.store.base import CommitResult, FetchCommit, HostStatsDelta
from courtier.store.memory import MemoryStore


def small_web(n_hosts: int = 6, pages: int = 8) -> SimWeb:
    return SimWeb([SimHost(f"h{i}.sim", ip=f"192.0.2.{i}", pages=pages, latency=0.3)
                   for i in range(n_hosts)])


def page_counts(crawl: SimCrawl) -> collections.Counter[tuple[str, str]]:
    return collections.Counter((r.host, r.path) for r in crawl.observer.requests
                               if r.path != "/robots.txt")


def allowed(web: SimWeb) -> set[tuple[str, str]]:
    return {(h.name, p) for h in web.hosts for p in ["/", *(f"/p/{i}" for i in range(h.pages))]}


async def one_event_per_url_version(store: MemoryStore) -> None:
    events = await store.read_events(0, 1_000_000)
    keys = [(e.url_key, e.version) for e in events]
    assert len(keys) == len(set(keys))


class AckLostStore(MemoryStore):
    """Applies the first commits, then reports failure (the acknowledgement is lost)."""

    def __init__(self, clock: LoopClock, lose: int) -> None:
        super().__init__(clock)
        self.lose = lose
        self.lost = 0

    async def commit(self, commits: Sequence[FetchCommit],
                     host_stats: Sequence[HostStatsDelta] = ()) -> CommitResult:
        result = await super().commit(commits, host_stats)
        if self.lost < self.lose and result.applied:
            self.lost += 1
            raise StoreError("connection lost after COMMIT (simulated)")
        return result


class FullDiskStore(MemoryStore):
    """Refuses every commit until ``until`` (virtual seconds from the first attempt)."""

    def __init__(self, clock: LoopClock, until: float) -> None:
        super().__init__(clock)
        self.until = until
        self.first: float | None = None
        self.refused = 0

    async def commit(self, commits: Sequence[FetchCommit],
                     host_stats: Sequence[HostStatsDelta] = ()) -> CommitResult:
        now = self.clock.now()
        self.first = now if self.first is None else self.first
        if commits and now - self.first < self.until:
            self.refused += 1
            raise StoreError("database or disk is full (simulated)")
        return await super().commit(commits, host_stats)


class FullDiskArchive(DigestOnlyArchive):
    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def write_exchange(self, response: FetchResponse,
                       warc_date: float | None = None) -> ArchivedRecord:
        if self.failures > 0:
            self.failures -= 1
            raise ArchiveError("No space left on device (simulated)")
        return super().write_exchange(response, warc_date)


def test_lost_commit_acknowledgement_is_a_harmless_repeat() -> None:
    async def go() -> None:
        web = small_web()
        crawl = SimCrawl(web, sim_config(delay=0.5))
        store = AckLostStore(crawl.clock, lose=5)
        crawl.store = store
        report = await crawl.run()
        assert store.lost == 5
        assert report.violations == []
        counts = page_counts(crawl)
        assert set(counts) == allowed(web) and max(counts.values()) == 1
        assert report.status.stale_commits > 0  # the retried batches were recognised
        registry = report.worker.metrics.registry
        emitted = registry.get_sample_value("courtier_outbox_events_total") or 0
        # events whose acknowledgement was lost are in the outbox but unknown to the worker
        assert 0 < emitted < len(await store.read_events(0, 100_000))
        assert (registry.get_sample_value("courtier_store_commit_seconds_count") or 0) > 0
        await one_event_per_url_version(store)

    run_virtual(go())


def test_store_refusing_writes_pauses_and_loses_nothing() -> None:
    async def go() -> None:
        web = small_web()
        crawl = SimCrawl(web, sim_config(delay=0.5))
        store = FullDiskStore(crawl.clock, until=20.0)
        crawl.store = store
        report = await crawl.run()
        assert store.refused > 0
        assert report.violations == []
        assert set(page_counts(crawl)) == allowed(web)
        assert max(page_counts(crawl).values()) == 1
        await one_event_per_url_version(store)
        events = await store.read_events(0, 10_000)
        assert sum(e.payload["outcome"] == "ok" for e in events) == len(allowed(web))
        registry = report.worker.metrics.registry
        assert registry.get_sample_value("courtier_outbox_events_total") == len(events)

    run_virtual(go())


def test_archive_write_errors_release_the_url_for_a_later_fetch() -> None:
    async def go() -> None:
        web = small_web(n_hosts=3)
        crawl = SimCrawl(web, sim_config(delay=0.5))
        report = await crawl.run(archive=FullDiskArchive(failures=4))
        assert report.violations == []
        counts = page_counts(crawl)
        assert set(counts) == allowed(web)
        assert sum(counts.values()) == len(allowed(web)) + 4  # four pages fetched twice
        registry = report.worker.metrics.registry
        # leased again for the archive error; not refetches: no cycle of theirs was committed
        assert registry.get_sample_value("courtier_re_leases_total",
                                         {"reason": "archive_error"}) == 4
        assert registry.get_sample_value("courtier_refetches_total") == 0
        store = crawl.store
        assert isinstance(store, MemoryStore)
        await one_event_per_url_version(store)
        assert all(r["warc_file"] for r in store.urls.values() if r["outcome"] == "ok")

    run_virtual(go())


def test_crash_after_responses_before_commit_refetches_and_emits_once() -> None:
    class Crash(Exception):
        pass

    class KillableStore:
        """The crawl's store until ``kill()``; after it, every call fails (kill -9: from
        then on nothing reaches the store) until ``revive()`` (the next process)."""

        def __init__(self, store: MemoryStore) -> None:
            self.store, self.dead = store, False

        def kill(self) -> None:
            self.dead = True

        def revive(self) -> None:
            self.dead = False

        def __getattr__(self, name: str) -> object:
            if self.dead:
                async def dead(*_: object, **__: object) -> CommitResult:
                    raise Crash
                return dead
            return getattr(self.store, name)

    async def go() -> None:
        web = small_web()
        crawl = SimCrawl(web, sim_config(delay=0.5))
        store = crawl.store
        assert isinstance(store, MemoryStore)
        killable = KillableStore(store)
        crawl.store = killable  # type: ignore[assignment]

        async def crash_at_3s(worker: Worker, clock: LoopClock) -> None:
            await asyncio.sleep(3.0)
            for _ in range(10_000):  # crash just after a response, before its commit
                if worker.committer.pending:
                    break
                await asyncio.sleep(0.01)
            killable.kill()
            worker.abort()

        # the dead process's last calls fail (its commit task logs the Crash; its stop
        # writes nothing else since the refill reads without marking): nothing it did
        # after the kill reaches the store either way
        with contextlib.suppress(Crash):
            await crawl.run(during=crash_at_3s)
        assert killable.dead
        before = sum(page_counts(crawl).values())
        assert 0 < before < len(allowed(web))
        killable.revive()
        report = await crawl.run()  # a new process on the same store
        counts = page_counts(crawl)
        assert set(counts) == allowed(web)
        # every page fetched twice is one whose result the crash lost: still QUEUED at its
        # version, read again by the new process with nothing to reset (no row SCHEDULED)
        recovered = report.worker.metrics.registry.get_sample_value(
            "courtier_re_leases_total", {"reason": "recovered"})
        assert not recovered
        events = await store.read_events(0, 10_000)
        # exactly one "ok" event per page, though some pages were fetched twice
        assert sum(e.payload["outcome"] == "ok" for e in events) == len(allowed(web))
        assert sum(counts.values()) > len(allowed(web))
        await one_event_per_url_version(store)
        assert crawl.observer.violations == []

    run_virtual(go())


def test_a_usurped_owner_stops_fetching_and_its_commits_are_fenced() -> None:
    async def go() -> None:
        web = small_web(n_hosts=3, pages=60)
        crawl = SimCrawl(web, sim_config(delay=1.0))
        store = crawl.store
        taken_at: list[float] = []

        async def usurp(worker: Worker, clock: LoopClock) -> None:
            await asyncio.sleep(30.0)
            # another process believes the lease expired and takes every shard
            await store.acquire_shards("other", worker.shard_keeper.shards,
                                       clock.now() + SHARD_LEASE + 1, SHARD_LEASE)
            taken_at.append(clock.now())

        report = await crawl.run(during=usurp)
        assert report.status.stop_reason == "lost shard leases"
        registry = report.worker.metrics.registry
        assert (registry.get_sample_value("courtier_shard_leases_lost_total") or 0) > 0
        assert (registry.get_sample_value("courtier_stale_commits_total") or 0) > 0
        assert (registry.get_sample_value("courtier_politeness_violations_total") or 0) == 0
        late = [r for r in crawl.observer.requests
                if r.start > taken_at[0] + SHARD_LEASE / 3 + 1.0]
        assert late == []  # noticed at the next renewal; nothing issued after
        assert report.status.stale_commits > 0  # results after the takeover were refused
        assert isinstance(store, MemoryStore)
        await one_event_per_url_version(store)

    run_virtual(go())


def test_robots_change_is_obeyed_after_expiry() -> None:
    async def go() -> None:
        later = b"User-agent: *\nDisallow: /p/\n"
        web = SimWeb([SimHost("h.sim", pages=200, latency=0.05, robots_later=(100.0, later))])
        crawl = SimCrawl(web, sim_config(delay=1.0, robots_expiry=60.0))
        report = await crawl.run()
        assert report.violations == []  # the observer judges by the copy last served
        robots = [r for r in crawl.observer.requests if r.path == "/robots.txt"]
        assert len(robots) >= 2
        changed = next(r for r in robots if r.start - robots[0].start >= 100.0)
        after = [r for r in crawl.observer.requests
                 if r.start > changed.end and r.path.startswith("/p/")]
        assert after == []
        assert report.status.denied > 0

    run_virtual(go())


def test_dns_turning_private_blocks_the_host_without_a_request() -> None:
    async def go() -> None:
        web = SimWeb([SimHost("turncoat.sim", pages=100, latency=0.05, private_after=20.0),
                      SimHost("steady.sim", ip="192.0.2.2", pages=10)])
        crawl = SimCrawl(web, sim_config(delay=1.0))
        report = await crawl.run()
        assert report.violations == []
        # the real Resolver and AddressGuard decide: the simulated DNS only answers an
        # address; once the cached public answer has expired, the private one is refused
        dns = crawl.transport.resolver
        assert ("turncoat.sim", PRIVATE_ADDRESS) in dns.answers
        assert dns.guard.block_reason(PRIVATE_ADDRESS) is not None
        late = [r for r in crawl.observer.requests
                if r.host == "turncoat.sim"
                and r.start >= crawl.transport.t0 + 20.0 + SIM_TTL]  # type: ignore[operator]
        assert late == []
        store = crawl.store
        assert isinstance(store, MemoryStore)
        outcomes = collections.Counter(r["outcome"] for r in store.urls.values()
                                       if r["host_key"] == "http://turncoat.sim")
        assert outcomes["blocked"] > 0 and outcomes["ok"] > 0
        assert {(h, p) for h, p in page_counts(crawl) if h == "steady.sim"} == {
            ("steady.sim", p) for p in ["/", *(f"/p/{i}" for i in range(10))]}

    run_virtual(go())


class SlowStore(MemoryStore):
    """Commits take ``stall`` virtual seconds between ``start`` and ``end`` (a stalled
    disk); records when each discovered URL became durable."""

    def __init__(self, clock: LoopClock, start: float = 1e18, end: float = 1e18,
                 stall: float = 0.0) -> None:
        super().__init__(clock)
        self.window = (start, end)
        self.stall = stall
        self.lags: list[float] = []
        self.stalled_commits = 0

    async def commit(self, commits: Sequence[FetchCommit],
                     host_stats: Sequence[HostStatsDelta] = ()) -> CommitResult:
        now = self.clock.now()
        if self.window[0] <= now - self.clock.epoch < self.window[1]:
            self.stalled_commits += 1
            await asyncio.sleep(self.stall)
        result = await super().commit(commits, host_stats)
        done = self.clock.now()
        self.lags += [done - c.fetched_at for c in commits if c.new_urls]
        return result


def test_discovered_urls_are_durable_within_one_second() -> None:
    async def go() -> None:
        crawl = SimCrawl(small_web(n_hosts=8), sim_config(delay=0.5))
        store = SlowStore(crawl.clock)
        crawl.store = store
        await crawl.run()
        assert store.lags and max(store.lags) <= 1.0

    run_virtual(go())


def test_a_stalled_store_slows_fetching_instead_of_growing_memory() -> None:
    async def go() -> None:
        web = small_web(n_hosts=8, pages=30)
        crawl = SimCrawl(web, sim_config(delay=0.2, concurrency=4))
        store = SlowStore(crawl.clock, start=5.0, end=6.0, stall=60.0)
        crawl.store = store
        pending_peak = 0

        async def watch(worker: Worker, clock: LoopClock) -> None:
            nonlocal pending_peak
            while True:
                pending_peak = max(pending_peak, len(worker.committer.pending))
                await asyncio.sleep(0.1)

        report = await crawl.run(during=watch)
        assert store.stalled_commits >= 1
        stall_start = crawl.clock.epoch + 5.0
        during = [r for r in crawl.observer.requests
                  if stall_start + 2.0 < r.start < stall_start + 60.0]
        assert during == []  # nothing new was fetched while the commit hung
        assert pending_peak <= 4 + 200  # one batch plus what was in flight, never more
        assert set(page_counts(crawl)) == allowed(web)  # and nothing was lost
        assert report.violations == []

    run_virtual(go())
