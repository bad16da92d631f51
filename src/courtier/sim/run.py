"""Run the real worker (frontier, politeness, parsing, intake, commits) on a simulated web.

The worker, frontier and robots code are exactly those of a real crawl; only
the edges differ: a :class:`SimTransport` instead of aiohttp, a
digest-only archive instead of WARC files, an in-memory store, and a
virtual-time event loop, so hours of crawling run in seconds.

Fault-injection tests pass their own store or archive (wrappers that fail on
purpose) and a ``during`` coroutine that acts on the running worker (a
usurping owner, a crash) at chosen virtual times.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from courtier.archive.base import ArchiveWriter
from courtier.core.config import CrawlConfig
from courtier.crawl.intake import Intake, Scope
from courtier.crawl.status import CrawlStatus
from courtier.crawl.worker import Worker
from courtier.dedup.pages import load_fingerprinting
from courtier.frontier.traps import TemplateTracker, TrapRules
from courtier.politeness.robots import product_token
from courtier.sim.archive import DigestOnlyArchive
from courtier.sim.loop import LoopClock, run_virtual
from courtier.sim.observer import Observer, SimRequest
from courtier.sim.transport import SimTransport
from courtier.sim.web import SimWeb
from courtier.store.base import Store
from courtier.store.memory import MemoryStore

During = Callable[[Worker, LoopClock], Coroutine[Any, Any, None]]


@dataclass(slots=True)
class SimReport:
    status: CrawlStatus
    requests: list[SimRequest]
    violations: list[str]
    virtual_seconds: float
    store: Store
    due_lags: list[float]          # seconds from due to lease, per page lease
    worker: Worker


def sim_config(**overrides: object) -> CrawlConfig:
    """Settings for a simulated crawl: scope "any" (the simulated web is closed)."""
    base = CrawlConfig(scope="any", progress="none", concurrency=256, max_seconds=24 * 3600.0,
                       linger=24 * 3600.0)
    return dataclasses.replace(base, **overrides).validate()  # type: ignore[arg-type]


class SimCrawl:
    """One simulated web and observer, crawled by one or more successive workers."""

    def __init__(self, web: SimWeb, config: CrawlConfig | None = None,
                 store: Store | None = None) -> None:
        self.web = web
        self.config = config or sim_config()
        self.clock = LoopClock()
        self.observer = Observer(product_token(self.config.user_agent), self.config.delay,
                                 self.config.max_in_flight_per_host,
                                 self.config.max_in_flight_per_ip)
        self.transport = SimTransport(web, self.clock, self.observer)
        self.store: Store = store if store is not None else MemoryStore(self.clock)
        self._ips = {f"http://{h.name}": h.ip for h in web.hosts}
        self._seeded = False

    async def _resolve_ip(self, host_key: str) -> str | None:
        return self._ips.get(host_key)

    def worker(self, archive: ArchiveWriter | None = None) -> Worker:
        # imported now: a real crawl imports it in a thread at its first page request,
        # whose real time the virtual clock would not see (sim/loop.py)
        load_fingerprinting()
        intake = Intake(Scope(self.config, []), traps=TemplateTracker(TrapRules(), self.clock))
        worker = Worker(self.config, self.store, self.transport,
                        archive or DigestOnlyArchive(), self.clock, intake,
                        resolve_ip=self._resolve_ip, record_lags=True)
        worker.pacer.idle_poll = 600.0  # nothing arrives from outside a simulation
        return worker

    async def run(self, archive: ArchiveWriter | None = None,
                  during: During | None = None) -> SimReport:
        """Seed (first time only) and run one worker to its end."""
        worker = self.worker(archive)
        if not self._seeded:
            await self.store.open()
            rows, problems = worker.intake.seed_urls(
                list(enumerate(self.web.seeds(), 1)), "sim", self.clock.now())
            assert not problems, problems
            await worker.add_seeds(rows)
            self._seeded = True
        started = self.clock.now()
        side: asyncio.Task[None] | None = None
        if during is not None:
            side = asyncio.create_task(during(worker, self.clock))
        try:
            status = await worker.run()
        finally:
            if side is not None and not side.done():
                side.cancel()
        return SimReport(status, self.observer.requests, self.observer.violations,
                         self.clock.now() - started, self.store, worker.due_lags, worker)


def simulate(web: SimWeb, config: CrawlConfig | None = None) -> SimReport:
    """Crawl ``web`` to the end (nothing due, or a limit) in virtual time."""

    async def go() -> SimReport:
        return await SimCrawl(web, config).run()

    return run_virtual(go())
