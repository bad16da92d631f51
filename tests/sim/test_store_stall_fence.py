"""A cluster worker that fences itself while its requests wait on a stalled store.

In a cluster every request first asks the store for a slot of its address
(cluster/ip_slots.py). When the store stops answering (a restarting or
unreachable server) those asks hang; the leases cannot be renewed either, so the
worker's fence timer cancels every fetch task, including the ones still waiting
for their slot. Those requests were never sent: their host and address slots
and their URLs must go back, or the hosts stay "in flight" forever and their
URLs are never fetched once the store answers again (found by
tests/integration/cluster/test_store_restart.py after a PostgreSQL restart).

A fetch that already has its whole answer when the fence falls (it waits on the store
for its payload lookup) is no request open at any server: the fence lets it finish and
its result is committed, instead of throwing it away and fetching the URL again (the
kill -9 cluster test's refetches under load, docs/testing.md).
"""

from __future__ import annotations

import inspect
from typing import Any

from courtier.cluster.coordinator import LeaseSettings, ShardCoordinator
from courtier.cluster.timed_store import with_call_timeout
from courtier.crawl.intake import Intake, Scope
from courtier.crawl.worker import Worker
from courtier.frontier.traps import TemplateTracker, TrapRules
from courtier.sim.archive import DigestOnlyArchive
from courtier.sim.loop import LoopClock, run_virtual
from courtier.sim.run import SimCrawl, sim_config
from courtier.store.base import Store
from tests.sim.test_faults import allowed, one_event_per_url_version, page_counts, small_web

LEASE = 30.0   # seconds: the fence falls 22.5 s after the last renewal, the lease ends at 30
STALL = 24.0   # seconds the store hangs: past the fence, before the leases expire


class StallingStore:
    """The crawl's store, except that from the ``stall_at``-th call of ``stall_on`` on,
    every call hangs until ``STALL`` seconds later (then it is answered as usual)."""

    def __init__(self, store: Store, clock: LoopClock, stall_at: int,
                 stall_on: str = "acquire_ip_slot") -> None:
        self._store = store
        self._clock = clock
        self._stall_at = stall_at
        self._stall_on = stall_on
        self.slot_asks = 0
        self.back_at: float | None = None
        self.stalled_calls = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name in ("open", "close") or not callable(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            if name == self._stall_on:
                self.slot_asks += 1
                if self.slot_asks == self._stall_at and self.back_at is None:
                    self.back_at = self._clock.now() + STALL
            if self.back_at is not None and self._clock.now() < self.back_at:
                self.stalled_calls += 1
                await self._clock.sleep(self.back_at - self._clock.now())
            return await attr(*args, **kwargs)

        return call if inspect.iscoroutinefunction(attr) else attr


async def _crawl_through_a_stall(crawl: SimCrawl, stalling: StallingStore) -> Worker:
    """A cluster worker (its own coordinator, lease ``LEASE``) crawling ``crawl``'s web on
    ``stalling`` to the end."""
    await crawl.store.open()
    store = with_call_timeout(stalling)  # type: ignore[arg-type]
    coordinator = ShardCoordinator(store, "w1", crawl.clock, LeaseSettings(LEASE))
    intake = Intake(Scope(crawl.config, []),
                    traps=TemplateTracker(TrapRules(), crawl.clock))
    ips = {f"http://{h.name}": h.ip for h in crawl.web.hosts}

    async def resolve_ip(host_key: str) -> str | None:
        return ips.get(host_key)

    worker = Worker(crawl.config, store, crawl.transport, DigestOnlyArchive(),
                    crawl.clock, intake, resolve_ip=resolve_ip, coordinator=coordinator)
    worker.pacer.idle_poll = 600.0
    rows, problems = intake.seed_urls(list(enumerate(crawl.web.seeds(), 1)), "sim",
                                      crawl.clock.now())
    assert not problems
    await worker.add_seeds(rows)
    status = await worker.run()
    assert stalling.back_at is not None and stalling.stalled_calls > 0
    assert status.stop_reason == "nothing due", status.stop_reason
    assert set(page_counts(crawl)) == allowed(crawl.web)
    assert crawl.observer.violations == []
    await one_event_per_url_version(crawl.store)  # type: ignore[arg-type]
    return worker


def test_a_fence_while_requests_wait_for_an_ip_slot_gives_their_urls_back() -> None:
    async def go() -> None:
        crawl = SimCrawl(small_web(n_hosts=6, pages=12),
                         sim_config(delay=0.5, max_seconds=600.0))
        stalling = StallingStore(crawl.store, crawl.clock, stall_at=20)
        worker = await _crawl_through_a_stall(crawl, stalling)
        registry = worker.metrics.registry
        # the fence cancelled requests that were waiting on the stalled store
        fenced = registry.get_sample_value("courtier_fenced_requests_total") or 0
        assert fenced > 0
        # each request the fence cancelled is leased again (and fetched once: below)
        assert registry.get_sample_value("courtier_re_leases_total",
                                         {"reason": "cancelled"}) == fenced
        assert max(page_counts(crawl).values()) == 1

    run_virtual(go())


def test_a_fence_lets_a_fetch_that_has_its_answer_finish_and_commit() -> None:
    """The store stalls at a page's payload lookup (its answer is whole, its result not
    yet handed to the committer) until past the fence; the leases stay this worker's
    (no other worker), so that result can still be committed. Every page is fetched once.

    Seen red with the fence cancelling every fetch (``InFlight.cancel_all``, as before):
    the two pages waiting on their lookup at the fence were fetched twice."""
    async def go() -> None:
        crawl = SimCrawl(small_web(n_hosts=6, pages=12),
                         sim_config(delay=0.5, max_seconds=600.0))
        stalling = StallingStore(crawl.store, crawl.clock, stall_at=10,
                                 stall_on="payload_locations")
        await _crawl_through_a_stall(crawl, stalling)
        counts = page_counts(crawl)
        assert {page: n for page, n in counts.items() if n > 1} == {}

    run_virtual(go())
