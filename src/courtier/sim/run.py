"""Run the real worker (frontier, politeness, parsing, intake, commits) on a simulated web.

The worker, frontier and robots code are exactly those of a real crawl; only
the edges differ: a :class:`SimTransport` instead of aiohttp, a
digest-only archive instead of WARC files, an in-memory store, and a
virtual-time event loop, so hours of crawling run in seconds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from courtier.config import CrawlConfig
from courtier.intake import Intake, Scope
from courtier.politeness.robots import product_token
from courtier.sim.archive import DigestOnlyArchive
from courtier.sim.loop import LoopClock, run_virtual
from courtier.sim.observer import Observer, SimRequest
from courtier.sim.transport import SimTransport
from courtier.sim.web import SimWeb
from courtier.store.memory import MemoryStore
from courtier.worker import CrawlStatus, Worker


@dataclass(slots=True)
class SimReport:
    status: CrawlStatus
    requests: list[SimRequest]
    violations: list[str]
    virtual_seconds: float
    store: MemoryStore
    due_lags: list[float]          # seconds from due to lease, per page lease


def sim_config(**overrides: object) -> CrawlConfig:
    """Settings for a simulated crawl: scope "any" (the simulated web is closed)."""
    base = CrawlConfig(scope="any", progress="none", concurrency=256, max_seconds=24 * 3600.0,
                       linger=24 * 3600.0)
    return dataclasses.replace(base, **overrides).validate()  # type: ignore[arg-type]


async def _simulate(web: SimWeb, config: CrawlConfig) -> SimReport:
    clock = LoopClock()
    agent = product_token(config.user_agent)
    observer = Observer(agent, config.delay, config.max_in_flight_per_host,
                        config.max_in_flight_per_ip)
    transport = SimTransport(web, clock, observer)
    store = MemoryStore()
    await store.open()
    intake = Intake(Scope(config, []))
    ips = {f"http://{h.name}": h.ip for h in web.hosts}

    async def resolve_ip(host_key: str) -> str | None:
        return ips.get(host_key)

    worker = Worker(config, store, transport, DigestOnlyArchive(), clock, intake,
                    resolve_ip=resolve_ip, record_lags=True)
    rows, problems = intake.seed_urls(list(enumerate(web.seeds(), 1)), "sim", clock.now())
    assert not problems, problems
    await worker.add_seeds(rows)
    started = clock.now()
    status = await worker.run()
    await store.close()
    return SimReport(status, observer.requests, observer.violations, clock.now() - started,
                     store, worker.due_lags)


def simulate(web: SimWeb, config: CrawlConfig | None = None) -> SimReport:
    """Crawl ``web`` to the end (nothing due, or a limit) in virtual time."""
    return run_virtual(_simulate(web, config or sim_config()))
