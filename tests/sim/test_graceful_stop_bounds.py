"""A worker's graceful stop ends, whatever the store does meanwhile.

**A lost cancellation.**
A stopping worker cancels the task of its shard coordinator's rounds and waits for it.
A cancellation that arrives in the same loop iteration as a store call's answer can be
lost on the way (Python 3.11's ``asyncio.wait_for`` dropped it; a driver may too): the
rounds then went on, renewing the leases of a worker that waited for them to end, and
``courtier worker`` never exited after SIGTERM (seen in
tests/integration/cluster/test_store_loss.py; the worker's task list showed the rounds
task "cancelling" and still pausing between rounds). The stop now halts the rounds
before it cancels them (``ShardCoordinator.halt``) and waits for them with a bound.

**A store that refuses every commit from the stop on.** The commit was retried every
second for as long as it failed, so a stopping worker waited for the store forever
(even after a second Ctrl-C). It now gives the batch up after ``STOP_COMMIT_WAIT``;
those URLs stay scheduled and the next run fetches them again: nothing is lost.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from typing import Any

from courtier.cluster.coordinator import LeaseSettings, ShardCoordinator
from courtier.core.errors import StoreError
from courtier.crawl.committer import STOP_COMMIT_WAIT
from courtier.crawl.intake import Intake, Scope
from courtier.crawl.worker import Worker
from courtier.frontier.traps import TemplateTracker, TrapRules
from courtier.sim.archive import DigestOnlyArchive
from courtier.sim.loop import LoopClock, run_virtual
from courtier.sim.run import SimCrawl, SimReport, sim_config
from courtier.store.base import CommitResult, FetchCommit, HostStatsDelta, Store
from courtier.store.memory import MemoryStore
from tests.sim.test_faults import allowed, one_event_per_url_version, page_counts, small_web

LEASE = 30.0
STOP_AT_HEARTBEAT = 4     # the round during which the worker is asked to stop
LONG = 24 * 3600.0        # a heartbeat answered this late (virtual seconds)


class CancelLosingStore:
    """The crawl's store, except that the ``STOP_AT_HEARTBEAT``-th heartbeat asks the
    worker to stop and answers only when cancelled, losing the cancellation (it returns
    as if it had not been cancelled, as a call answered in that same iteration does)."""

    def __init__(self, store: Store, clock: LoopClock) -> None:
        self._store = store
        self._clock = clock
        self.worker: Worker | None = None
        self.heartbeats = 0
        self.lost_cancels = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name != "heartbeat":
            return attr

        async def heartbeat(*args: Any, **kwargs: Any) -> Any:
            self.heartbeats += 1
            if self.heartbeats == STOP_AT_HEARTBEAT:
                assert self.worker is not None
                self.worker.request_stop()
                try:
                    await self._clock.sleep(LONG)
                except asyncio.CancelledError:
                    self.lost_cancels += 1  # dropped: the answer goes back instead
            return await attr(*args, **kwargs)

        assert inspect.iscoroutinefunction(attr)
        return heartbeat


def test_a_graceful_stop_ends_when_the_coordinators_cancellation_is_lost() -> None:
    async def go() -> None:
        web = small_web(n_hosts=6, pages=200)  # far from done when the stop comes
        crawl = SimCrawl(web, sim_config(delay=0.5, max_seconds=48 * 3600.0))
        await crawl.store.open()
        losing = CancelLosingStore(crawl.store, crawl.clock)
        store: Store = losing  # type: ignore[assignment]
        coordinator = ShardCoordinator(store, "w1", crawl.clock, LeaseSettings(LEASE))
        intake = Intake(Scope(crawl.config, []),
                        traps=TemplateTracker(TrapRules(), crawl.clock))
        worker = Worker(crawl.config, store, crawl.transport, DigestOnlyArchive(),
                        crawl.clock, intake, coordinator=coordinator)
        losing.worker = worker
        rows, problems = intake.seed_urls(list(enumerate(web.seeds(), 1)), "sim",
                                          crawl.clock.now())
        assert not problems
        await worker.add_seeds(rows)
        began = crawl.clock.now()
        try:
            # a bound in virtual time: without the fix the stop never ends
            async with asyncio.timeout(LONG / 2):
                status = await worker.run()
        except TimeoutError:
            raise AssertionError(
                f"the worker was still stopping {LONG / 2:.0f} virtual s after the stop") \
                from None

        assert losing.lost_cancels == 1  # the rounds were cancelled inside the heartbeat
        assert status.stop_reason == "stopped", status.stop_reason
        assert crawl.clock.now() - began < LONG / 2
        # it left as a graceful stop does: every lease released, the membership left
        view = await crawl.store.cluster_view()  # type: ignore[attr-defined]
        assert [lease.shard for lease in view.leases if lease.owner == "w1"] == []
        assert "w1" not in {w.worker_id for w in view.workers}
        assert coordinator.held == {}

    run_virtual(go())


STOP_AT_COMMIT = 3   # the commit call during which the worker is asked to stop


class GoneAtStopStore(MemoryStore):
    """From the ``STOP_AT_COMMIT``-th commit on (while ``gone``), every commit fails, and
    that one asks the worker to stop first."""

    def __init__(self, clock: LoopClock) -> None:
        super().__init__(clock)
        self.worker: Worker | None = None
        self.gone = True
        self.calls = 0
        self.refused = 0

    async def commit(self, commits: Sequence[FetchCommit],
                     host_stats: Sequence[HostStatsDelta] = ()) -> CommitResult:
        self.calls += 1
        if self.gone and self.calls >= STOP_AT_COMMIT:
            if self.calls == STOP_AT_COMMIT:
                assert self.worker is not None
                self.worker.request_stop()
            self.refused += 1
            raise StoreError("the server is gone")
        return await super().commit(commits, host_stats)


def test_a_stop_gives_up_a_commit_the_store_keeps_refusing_and_loses_nothing() -> None:
    async def go() -> None:
        web = small_web(n_hosts=6, pages=40)
        crawl = SimCrawl(web, sim_config(delay=0.5))
        store = GoneAtStopStore(crawl.clock)
        crawl.store = store

        async def during(worker: Worker, clock: LoopClock) -> None:
            store.worker = worker

        # a bound in virtual time (not a cancellation: a worker waiting for its commit
        # did not end when cancelled either)
        running = asyncio.create_task(crawl.run(during=during))
        await asyncio.wait({running}, timeout=3600.0)
        assert running.done(), f"still stopping after {store.refused} refused commits"
        first: SimReport = running.result()
        assert first.status.stop_reason == "stopped", first.status.stop_reason
        assert first.worker.committer.given_up > 0
        assert store.refused > 1  # retried for a while before giving up
        assert first.virtual_seconds >= STOP_COMMIT_WAIT

        store.gone = False  # the store is back: the next run fetches what was given up
        second = await crawl.run()
        assert second.status.stop_reason == "nothing due", second.status.stop_reason
        counts = page_counts(crawl)
        assert set(counts) == allowed(web)
        assert crawl.observer.violations == []
        await one_event_per_url_version(store)
        events = await store.read_events(0, 1_000_000)
        assert {e.payload["url"] for e in events} >= {
            f"http://{host}{path}" for host, path in allowed(web)}

    run_virtual(go())
