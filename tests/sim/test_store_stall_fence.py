"""A cluster worker that fences itself while its requests wait on a stalled store.

In a cluster every request first asks the store for a slot of its address
(cluster/ip_slots.py). When the store stops answering (a restarting or
unreachable server) those asks hang; the leases cannot be renewed either, so the
worker's fence timer cancels every fetch task, including the ones still waiting
for their slot. Those requests were never sent: their host and address slots
and their URLs must go back, or the hosts stay "in flight" forever and their
URLs are never fetched once the store answers again (found by
tests/integration/cluster/test_store_restart.py after a PostgreSQL restart).
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
    """The crawl's store, except that from the ``stall_at``-th IP-slot request on, every
    call hangs until ``STALL`` seconds later (then it is answered as usual)."""

    def __init__(self, store: Store, clock: LoopClock, stall_at: int) -> None:
        self._store = store
        self._clock = clock
        self._stall_at = stall_at
        self.slot_asks = 0
        self.back_at: float | None = None
        self.stalled_calls = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name in ("open", "close") or not callable(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            if name == "acquire_ip_slot":
                self.slot_asks += 1
                if self.slot_asks == self._stall_at and self.back_at is None:
                    self.back_at = self._clock.now() + STALL
            if self.back_at is not None and self._clock.now() < self.back_at:
                self.stalled_calls += 1
                await self._clock.sleep(self.back_at - self._clock.now())
            return await attr(*args, **kwargs)

        return call if inspect.iscoroutinefunction(attr) else attr


def test_a_fence_while_requests_wait_for_an_ip_slot_gives_their_urls_back() -> None:
    async def go() -> None:
        web = small_web(n_hosts=6, pages=12)
        crawl = SimCrawl(web, sim_config(delay=0.5, max_seconds=600.0))
        await crawl.store.open()
        stalling = StallingStore(crawl.store, crawl.clock, stall_at=20)
        store = with_call_timeout(stalling)  # type: ignore[arg-type]
        coordinator = ShardCoordinator(store, "w1", crawl.clock, LeaseSettings(LEASE))
        intake = Intake(Scope(crawl.config, []),
                        traps=TemplateTracker(TrapRules(), crawl.clock))
        ips = {f"http://{h.name}": h.ip for h in web.hosts}

        async def resolve_ip(host_key: str) -> str | None:
            return ips.get(host_key)

        worker = Worker(crawl.config, store, crawl.transport, DigestOnlyArchive(),
                        crawl.clock, intake, resolve_ip=resolve_ip, coordinator=coordinator)
        worker.pacer.idle_poll = 600.0
        rows, problems = intake.seed_urls(list(enumerate(web.seeds(), 1)), "sim",
                                          crawl.clock.now())
        assert not problems
        await worker.add_seeds(rows)
        status = await worker.run()

        registry = worker.metrics.registry
        assert stalling.back_at is not None and stalling.stalled_calls > 0
        # the fence cancelled requests that were waiting on the stalled store
        fenced = registry.get_sample_value("courtier_fenced_requests_total") or 0
        assert fenced > 0
        # each request the fence cancelled is leased again (and fetched once: below)
        assert registry.get_sample_value("courtier_re_leases_total",
                                         {"reason": "cancelled"}) == fenced
        assert status.stop_reason == "nothing due", status.stop_reason
        counts = page_counts(crawl)
        assert set(counts) == allowed(web)
        assert max(counts.values()) == 1
        assert crawl.observer.violations == []
        await one_event_per_url_version(crawl.store)  # type: ignore[arg-type]

    run_virtual(go())
