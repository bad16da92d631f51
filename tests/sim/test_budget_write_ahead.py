"""Write-ahead daily counts: every page request reaches the server only after the store
holds a count that includes it, so a crash at any moment cannot un-count a fetch."""

from __future__ import annotations

from courtier.core.urls import canonicalize
from courtier.fetch.transport import FetchLimits, FetchRequest, FetchResponse
from courtier.sim.loop import run_virtual
from courtier.sim.run import SimCrawl, sim_config
from courtier.sim.transport import SimTransport
from courtier.sim.web import SimHost, SimWeb
from courtier.store.base import DAILY_BUDGET_KEY
from courtier.store.memory import MemoryStore


class CheckingTransport:
    """Counts page requests as the server would, and reads the store at each one."""

    def __init__(self, inner: SimTransport, store: MemoryStore, host_key: str) -> None:
        self.inner, self.store, self.host_key = inner, store, host_key
        self.pages = 0
        self.behind: list[tuple[int, int, int]] = []

    async def fetch(self, request: FetchRequest, limits: FetchLimits) -> FetchResponse:
        if not request.url.endswith("/robots.txt"):
            self.pages += 1
            total = self.store.day_counts.get(DAILY_BUDGET_KEY)
            host = self.store.day_counts.get(self.host_key)
            saved_total = total.used if total else 0
            saved_host = host.used if host else 0
            if saved_total < self.pages or saved_host < self.pages:
                self.behind.append((self.pages, saved_total, saved_host))
        return await self.inner.fetch(request, limits)

    async def close(self) -> None:
        await self.inner.close()


def test_counts_are_saved_before_each_page_request() -> None:
    web = SimWeb([SimHost(name="a.sim", ip="192.0.2.1", pages=12, latency=0.05)], seed=3)
    config = sim_config(daily_budget=2400, max_pages=10, delay=0.5)

    async def go() -> CheckingTransport:
        sim = SimCrawl(web, config)
        store = sim.store
        assert isinstance(store, MemoryStore)
        host = canonicalize("http://a.sim/").host_key
        await store.open()
        await store.set_policy(host, canonicalize("http://a.sim/").shard, None, None, 50, False)
        checking = CheckingTransport(sim.transport, store, host)
        sim.transport = checking  # type: ignore[assignment]
        await sim.run()
        return checking

    checking = run_virtual(go())
    assert checking.pages == 10
    assert checking.behind == []
