"""A fetch task cancelled before its first step gives its lease back.

The one-worker Citus crawl of the realistic web at load 15-20 was fenced over and over
(its event loop held for seconds at a time), then sent no request for its last 7 minutes
and never ended: 58 hosts kept URLs never requested, each of them answered every request
it was sent. A real crawl runs on uvloop, which runs the timers that fell due before the
first step of the tasks queued meanwhile (sim/loop.py). When the loop's turn that issued
fetches held the loop past the fence deadline, the fence cut those fetches before their
coroutine ever ran: the fetch's own ``except CancelledError`` (which frees the host's
slot and gives the URL back) was never entered, so each such host stayed "in flight" in
the frontier for ever, its URLs queued in memory and skipped by the refill.

Here the turn that starts a fetch holds the (virtual) loop past the fence deadline, on a
loop in uvloop's order; the judge is the simulated web's observer: every page requested
(again only when the fence cut its request), no politeness violation, and the crawl ends
by itself ("nothing due").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from courtier.cluster.coordinator import LeaseSettings, ShardCoordinator
from courtier.crawl.intake import Intake, Scope
from courtier.crawl.worker import Worker
from courtier.frontier.traps import TemplateTracker, TrapRules
from courtier.sim.archive import DigestOnlyArchive
from courtier.sim.loop import VirtualTimeLoop, run_virtual
from courtier.sim.run import SimCrawl, sim_config
from tests.sim.test_faults import allowed, page_counts, small_web

LEASE = 30.0     # seconds: the fence falls 22.5 s after the last renewal
HOLD_AT = 20     # the fetch whose start holds the loop (the first ones are robots.txt)
PAST_FENCE = 0.5  # seconds the loop is held past the fence deadline


def _holding_at(start: Callable[..., None], nth: int, hold: Callable[[], None]
                ) -> Callable[..., None]:
    """``start`` (InFlight.start), except that the ``nth`` call holds the loop (``hold``)
    once the task is created: the turn issuing it is held past the fence."""
    calls = 0

    def started(*args: Any) -> None:
        nonlocal calls
        start(*args)
        calls += 1
        if calls == nth:
            hold()

    return started


def test_fetches_cut_by_a_fence_before_their_first_step_are_fetched_later() -> None:
    """Seen red without the give-back of unstarted tasks (``InFlight._done``): the crawl
    ran to --max-seconds with the fenced fetches' hosts in flight for ever, their pages
    never requested."""
    async def go() -> None:
        crawl = SimCrawl(small_web(n_hosts=8, pages=10),
                         sim_config(delay=0.5, concurrency=16, max_seconds=900.0))
        await crawl.store.open()
        coordinator = ShardCoordinator(crawl.store, "w1", crawl.clock, LeaseSettings(LEASE))
        intake = Intake(Scope(crawl.config, []),
                        traps=TemplateTracker(TrapRules(), crawl.clock))
        ips = {f"http://{h.name}": h.ip for h in crawl.web.hosts}

        async def resolve_ip(host_key: str) -> str | None:
            return ips.get(host_key)

        worker = Worker(crawl.config, crawl.store, crawl.transport, DigestOnlyArchive(),
                        crawl.clock, intake, resolve_ip=resolve_ip, coordinator=coordinator)
        worker.pacer.idle_poll = 600.0
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualTimeLoop)
        held_at: list[float] = []

        def hold() -> None:
            held_at.append(crawl.clock.now())
            loop.hold(coordinator.fence_at - crawl.clock.now() + PAST_FENCE)

        worker.in_flight.start = _holding_at(  # type: ignore[method-assign]
            worker.in_flight.start, HOLD_AT, hold)
        rows, problems = intake.seed_urls(list(enumerate(crawl.web.seeds(), 1)), "sim",
                                          crawl.clock.now())
        assert not problems
        await worker.add_seeds(rows)
        status = await worker.run()
        assert held_at, "the loop was never held"
        fenced = worker.metrics.registry.get_sample_value("courtier_fenced_requests_total")
        assert fenced, "the hold brought no fence"
        assert status.stop_reason == "nothing due", status.stop_reason
        counts = page_counts(crawl)
        assert set(counts) == allowed(crawl.web)
        for page, n in counts.items():  # at least once: only a request the fence cut
            tries = [r for r in crawl.observer.requests if (r.host, r.path) == page]
            assert n == 1 or all(r.status == 0 for r in tries[:-1]), tries
        assert crawl.observer.violations == []
        assert worker.frontier.in_flight == 0

    run_virtual(go(), timers_first=True)
