"""Held-loop fuzz: one cluster worker crawls a simulated web while its event loop is held
for seconds at random moments (a starved machine), in virtual time.

The one-worker Citus crawl of the realistic web at load 15-20 was fenced over and over,
then left 58 hosts without a request and never ended (CHANGELOG, "cancelled a fetch task
before its first step"). This tool drives the real worker (frontier, fetcher, committer,
coordinator and its fence) on the simulator (``courtier.sim``) with a wrapped store and
transport: after a share of the store calls and of the answers the loop is held (virtual
time jumps while nothing else runs: ``VirtualTimeLoop.hold``), and a share of the store
calls fail as a cut connection does (before the call, or with its answer lost). The loop
runs in uvloop's order (timers due before the first step of new tasks: ``sim/loop.py``)
unless ``--asyncio-order``.

The judge is the simulated web's observer and the worker's own end: a run is good when
every page was requested and the crawl ended by itself ("nothing due") before
``--max-seconds`` (virtual). For each bad run it prints the leases the frontier issued
that never ended (a finish, a return or a deferral), with how their task ended.

    .venv/bin/python bench/held_loop_fuzz.py --seeds 30

Deterministic: a seed gives the same run on the same tree.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import logging
import random
import sys
from collections.abc import Callable
from typing import Any

from courtier.cluster.coordinator import LeaseSettings, ShardCoordinator
from courtier.cluster.timed_store import with_call_timeout
from courtier.core.errors import StoreError
from courtier.crawl.in_flight import InFlight
from courtier.crawl.intake import Intake, Scope
from courtier.crawl.worker import Worker
from courtier.dedup.pages import load_fingerprinting
from courtier.fetch.transport import FetchLimits, FetchRequest, FetchResponse
from courtier.frontier.lease import Lease
from courtier.frontier.scheduler import Frontier
from courtier.frontier.traps import TemplateTracker, TrapRules
from courtier.sim.archive import DigestOnlyArchive
from courtier.sim.loop import VirtualTimeLoop, run_virtual
from courtier.sim.run import SimCrawl, sim_config
from courtier.sim.transport import SimTransport
from courtier.sim.web import SimHost, SimWeb
from courtier.store.base import Store


def _hold(seconds: float) -> None:
    loop = asyncio.get_running_loop()
    assert isinstance(loop, VirtualTimeLoop)
    loop.hold(seconds)


class Faults:
    """Where and how long the loop is held, and which store calls are cut."""

    def __init__(self, rng: random.Random, p_hold: float, max_hold: float,
                 p_cut: float) -> None:
        self.rng, self.p_hold, self.max_hold, self.p_cut = rng, p_hold, max_hold, p_cut
        self.active = False  # off while the seeds are added
        self.holds = 0
        self.cuts = 0

    def maybe_hold(self, share: float = 1.0) -> None:
        if self.active and self.rng.random() < self.p_hold * share:
            self.holds += 1
            _hold(self.rng.uniform(0.5, self.max_hold))

    def cut(self) -> bool:
        if self.active and self.rng.random() < self.p_cut:
            self.cuts += 1
            return True
        return False


class HeldStore:
    """The store, with the loop held around some calls and some calls cut."""

    def __init__(self, store: Store, faults: Faults) -> None:
        self._store = store
        self._faults = faults

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name in ("open", "close") or not inspect.iscoroutinefunction(attr):
            return attr
        faults = self._faults

        async def call(*args: Any, **kwargs: Any) -> Any:
            faults.maybe_hold()
            if faults.cut():
                if faults.rng.random() < 0.5:
                    raise StoreError(f"{name}: the underlying connection is closed")
                await attr(*args, **kwargs)
                raise StoreError(f"{name}: connection was closed in the middle of operation")
            result = await attr(*args, **kwargs)
            faults.maybe_hold(0.5)
            return result

        return call


class HeldTransport:
    """The simulated web's transport; the loop is held after some answers."""

    def __init__(self, inner: SimTransport, faults: Faults) -> None:
        self._inner = inner
        self._faults = faults

    async def fetch(self, request: FetchRequest, limits: FetchLimits) -> FetchResponse:
        response = await self._inner.fetch(request, limits)
        self._faults.maybe_hold()
        return response

    async def close(self) -> None:
        await self._inner.close()


class LeaseLedger:
    """Every lease the frontier issues, and whether it ended (finished, returned or
    deferred); how each fetch task ended (installed on the classes, for one run)."""

    def __init__(self) -> None:
        self.issued: dict[int, Lease] = {}
        self.ended: set[int] = set()
        self.task_ends: dict[int, str] = {}

    def install(self) -> Callable[[], None]:
        saved: list[tuple[type, str, Any]] = []

        def patch(cls: type, name: str, make: Callable[[Any], Any]) -> None:
            original = getattr(cls, name)
            saved.append((cls, name, original))
            setattr(cls, name, make(original))

        def next_lease(original: Any) -> Any:
            def wrapped(frontier: Frontier) -> Lease | None:
                lease = original(frontier)
                if lease is not None:
                    self.issued[id(lease)] = lease
                return lease  # type: ignore[no-any-return]
            return wrapped

        def ending(original: Any) -> Any:
            def wrapped(frontier: Frontier, lease: Lease, *args: Any, **kwargs: Any) -> Any:
                self.ended.add(id(lease))
                return original(frontier, lease, *args, **kwargs)
            return wrapped

        def done(original: Any) -> Any:
            def wrapped(in_flight: InFlight, task: asyncio.Task[None]) -> None:
                lease = in_flight._leases.get(task)  # a bench's look inside
                if lease is not None:
                    self.task_ends[id(lease)] = "cancelled" if task.cancelled() else (
                        repr(task.exception()) if task.exception() else "done")
                original(in_flight, task)
            return wrapped

        patch(Frontier, "next_lease", next_lease)
        for name in ("finish_page", "finish_robots", "return_lease", "defer_lease"):
            patch(Frontier, name, ending)
        patch(InFlight, "_done", done)

        def undo() -> None:
            for cls, name, original in saved:
                setattr(cls, name, original)
        return undo

    def open_leases(self) -> list[tuple[str, str, str]]:
        return [(lease.host_key, lease.url, self.task_ends.get(key, "?"))
                for key, lease in self.issued.items() if key not in self.ended]


def one_run(seed: int, a: argparse.Namespace) -> tuple[bool, str]:
    rng = random.Random(seed)
    web = SimWeb([SimHost(f"h{i}.sim", ip=f"192.0.2.{i}", pages=a.pages,
                          latency=rng.uniform(0.05, 1.0)) for i in range(a.hosts)])
    ledger = LeaseLedger()

    async def go() -> tuple[bool, str]:
        load_fingerprinting()
        crawl = SimCrawl(web, sim_config(delay=0.2, concurrency=a.concurrency,
                                         max_seconds=a.max_seconds, linger=0.0,
                                         max_in_flight_per_ip=a.ip_cap))
        await crawl.store.open()
        faults = Faults(rng, a.p_hold, a.max_hold, a.p_cut)
        store = with_call_timeout(HeldStore(crawl.store, faults))
        coordinator = ShardCoordinator(store, "w1", crawl.clock, LeaseSettings(a.lease_ttl))
        intake = Intake(Scope(crawl.config, []),
                        traps=TemplateTracker(TrapRules(), crawl.clock))
        ips = {f"http://{h.name}": h.ip for h in web.hosts}

        async def resolve_ip(host_key: str) -> str | None:
            return ips.get(host_key)

        worker = Worker(crawl.config, store, HeldTransport(crawl.transport, faults),
                        DigestOnlyArchive(), crawl.clock, intake, resolve_ip=resolve_ip,
                        coordinator=coordinator)
        worker.pacer.idle_poll = 600.0
        rows, problems = intake.seed_urls(list(enumerate(web.seeds(), 1)), "sim",
                                          crawl.clock.now())
        assert not problems, problems
        await worker.add_seeds(rows)
        faults.active = True
        status = await worker.run()
        wanted = {(h.name, p) for h in web.hosts
                  for p in ["/", *(f"/p/{i}" for i in range(h.pages))]}
        got = {(r.host, r.path) for r in crawl.observer.requests if r.path != "/robots.txt"}
        missing = wanted - got
        fenced = worker.metrics.registry.get_sample_value("courtier_fenced_requests_total")
        good = status.stop_reason == "nothing due" and not missing
        line = (f"stop={status.stop_reason!r} missing={len(missing)} "
                f"on {len({h for h, _ in missing})} hosts, holds={faults.holds} "
                f"cuts={faults.cuts} fenced={int(fenced or 0)} "
                f"virtual={crawl.clock.now() - crawl.clock.epoch:.0f} s")
        if not good:
            open_leases = ledger.open_leases()
            line += f"; leases never ended: {len(open_leases)} {open_leases[:3]}"
        return good, line

    undo = ledger.install()
    try:
        return run_virtual(go(), timers_first=not a.asyncio_order)
    finally:
        undo()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20, help="runs, seeds 0..N-1")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--hosts", type=int, default=20)
    ap.add_argument("--pages", type=int, default=15, help="chain pages a host")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--lease-ttl", type=float, default=30.0)
    ap.add_argument("--p-hold", type=float, default=0.2,
                    help="share of store calls and answers after which the loop is held")
    ap.add_argument("--max-hold", type=float, default=12.0,
                    help="longest hold, s (each is uniform from 0.5 s)")
    ap.add_argument("--p-cut", type=float, default=0.05, help="share of store calls cut")
    ap.add_argument("--ip-cap", type=int, default=0, help="--max-in-flight-per-ip")
    ap.add_argument("--max-seconds", type=float, default=3000.0, help="virtual")
    ap.add_argument("--asyncio-order", action="store_true",
                    help="asyncio's order (new tasks before due timers), not uvloop's")
    ap.add_argument("--log", action="store_true",
                    help="the worker's log lines on stderr (fences, store pauses)")
    a = ap.parse_args(argv)
    if not a.log:
        logging.disable(logging.CRITICAL)
    bad = 0
    for seed in range(a.first_seed, a.first_seed + a.seeds):
        good, line = one_run(seed, a)
        bad += not good
        print(f"seed {seed}: {'good' if good else 'BAD '} {line}", flush=True)
    print(f"{bad} bad of {a.seeds}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
