"""One store error on any call of a cluster worker strands nothing (the stalled
one-worker PostgreSQL crawl of the realistic web: asyncpg's "connection is closed" on a
heartbeat, a commit, a postponement, a robots.txt save, …, then 58 hosts without a
request for 13 minutes).

Each case makes the ``at``-th call of one store method raise the store's error, before the
call reaches the store or after it was applied (the answer lost), and checks that the
worker still fetches every page and ends by itself. The sweep over every method the crawl
calls (1st, 2nd and 5th call, before and after) found nothing stranded; these are the
calls of that crawl's log and of the loop's hand-overs."""

from __future__ import annotations

import collections
import inspect
from typing import Any

import pytest

from courtier.cluster.coordinator import LeaseSettings, ShardCoordinator
from courtier.cluster.timed_store import with_call_timeout
from courtier.core.errors import StoreError
from courtier.crawl.intake import Intake, Scope
from courtier.crawl.worker import Worker
from courtier.frontier.traps import TemplateTracker, TrapRules
from courtier.sim.archive import DigestOnlyArchive
from courtier.sim.loop import run_virtual
from courtier.sim.run import SimCrawl, sim_config
from courtier.store.base import Store
from tests.sim.test_faults import allowed, one_event_per_url_version, page_counts, small_web


class FailingOnce:
    """The crawl's store, except that the ``at``-th call of ``method`` raises StoreError
    (before the call, or ``after`` it was applied)."""

    def __init__(self, store: Store, method: str, at: int, after: bool) -> None:
        self._store = store
        self._method, self._at, self._after = method, at, after
        self.calls: collections.Counter[str] = collections.Counter()
        self.failed = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name in ("open", "close") or not inspect.iscoroutinefunction(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            boom = name == self._method and self.calls[name] == self._at
            if boom and not self._after:
                self.failed += 1
                raise StoreError(f"{name} failed: the underlying connection is closed")
            result = await attr(*args, **kwargs)
            if boom:
                self.failed += 1
                raise StoreError(f"{name} failed: connection was closed in the middle of "
                                 "operation")
            return result

        return call


@pytest.mark.parametrize("after", [False, True], ids=["refused", "answer-lost"])
@pytest.mark.parametrize("method", ["heartbeat", "acquire_shards", "read_due", "load_host",
                                    "save_robots", "payload_locations", "commit",
                                    "next_due_at"])
def test_one_store_error_strands_nothing(method: str, after: bool) -> None:
    async def go() -> None:
        crawl = SimCrawl(small_web(n_hosts=4, pages=6), sim_config(delay=0.5))
        await crawl.store.open()
        # a lone worker acquires in its first round only (the later ones renew by their
        # heartbeat): its first acquisition is the one that fails
        failing = FailingOnce(crawl.store, method, 1 if method == "acquire_shards" else 2,
                              after)
        store = with_call_timeout(failing)  # type: ignore[arg-type]
        coordinator = ShardCoordinator(store, "w1", crawl.clock, LeaseSettings(30.0))
        intake = Intake(Scope(crawl.config, []),
                        traps=TemplateTracker(TrapRules(), crawl.clock))
        worker = Worker(crawl.config, store, crawl.transport, DigestOnlyArchive(),
                        crawl.clock, intake, coordinator=coordinator)
        rows, problems = intake.seed_urls(list(enumerate(crawl.web.seeds(), 1)), "sim",
                                          crawl.clock.now())
        assert not problems
        await worker.add_seeds(rows)
        status = await worker.run()
        assert failing.failed == 1, dict(failing.calls)
        assert status.stop_reason == "nothing due", status.stop_reason
        assert set(page_counts(crawl)) == allowed(crawl.web)
        await one_event_per_url_version(crawl.store)  # type: ignore[arg-type]

    run_virtual(go())
