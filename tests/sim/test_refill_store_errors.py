"""A store error in the middle of a refill loses no row.

``read_due`` returns rows (with their stored values) without marking them; the refill
then reads their hosts' tiers (``host_tiers``), the scope rules and the hosts' records
before it hands them to the frontier. A store error in any of those reads (a
connection cut after ``read_due`` answered: seen after a PostgreSQL restart in
tests/integration/cluster/test_store_restart.py) drops those rows from memory: they
are QUEUED in the store as before, and a later refill reads them again (when the
refill marked rows SCHEDULED, it had to keep them in memory for the next one).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from courtier.core.errors import StoreError
from courtier.sim.loop import run_virtual
from courtier.sim.run import SimCrawl, sim_config
from courtier.store.base import DueUrl, HostRecord, HostTierRecord
from courtier.store.memory import MemoryStore
from tests.sim.test_faults import allowed, one_event_per_url_version, page_counts, small_web


class CutAfterRefillStore(MemoryStore):
    """Fails the ``fail_on``-th non-empty call of ``method`` after a refill that returned rows
    (the connection was cut right after ``read_due`` answered)."""

    def __init__(self, crawl: SimCrawl, method: str, fail_on: int = 2) -> None:
        super().__init__(crawl.clock)
        self.method = method
        self.fail_on = fail_on
        self.after_refill = 0
        self.failed = 0
        self.stranded: list[bytes] = []  # url keys of the rows the failed refill returned
        self._last_due: list[DueUrl] = []

    async def read_due(self, shards: Sequence[int], now: float, limit: int,
                       per_host_limit: int, skip_hosts: Collection[str] = (),
                       epochs: Mapping[int, int] | None = None) -> list[DueUrl]:
        due = await super().read_due(shards, now, limit, per_host_limit, skip_hosts, epochs)
        self._last_due = due
        return due

    def _maybe_fail(self, what: object) -> None:
        if not what or not self._last_due:
            return
        self.after_refill += 1
        if self.after_refill == self.fail_on:
            self.failed += 1
            self.stranded = [d.url_key for d in self._last_due]
            raise StoreError(f"{self.method} failed: connection lost (simulated)")

    async def host_tiers(self, host_keys: Collection[str]) -> dict[str, HostTierRecord]:
        if self.method == "host_tiers":
            self._maybe_fail(host_keys)
        return await super().host_tiers(host_keys)

    async def load_host(self, host_key: str) -> HostRecord | None:
        if self.method == "load_host":
            self._maybe_fail(host_key)
        return await super().load_host(host_key)


def _crawl_with(method: str) -> None:
    async def go() -> None:
        web = small_web(n_hosts=4, pages=6)
        crawl = SimCrawl(web, sim_config(delay=0.5))
        store = CutAfterRefillStore(crawl, method)
        crawl.store = store
        report = await crawl.run()
        assert store.failed == 1 and store.stranded
        assert report.status.stop_reason == "nothing due"
        counts = page_counts(crawl)
        assert set(counts) == allowed(web)  # the rows of the failed refill were fetched
        assert max(counts.values()) == 1
        assert report.violations == []
        assert (await store.counts())["scheduled"] == 0
        await one_event_per_url_version(store)

    run_virtual(go())


def test_a_lost_connection_while_reading_the_refilled_hosts_tiers_strands_nothing() -> None:
    _crawl_with("host_tiers")


def test_a_lost_connection_while_registering_the_refilled_hosts_strands_nothing() -> None:
    _crawl_with("load_host")
