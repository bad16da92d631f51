"""A refill whose answer is lost makes no URL fetched twice.

The refill reads without marking (``read_due``), so a lost answer (a connection cut,
seen in tests/integration/cluster/test_store_loss.py) leaves nothing to recover: the
next refill simply reads again. What it must not read is a row the worker still holds —
a fetch in flight, a result waiting for its commit while commits fail — which is
QUEUED at the same version in the store: every host of which the worker holds anything
is skipped (``Refiller.held_hosts``). When the marking refill recovered from a lost
answer by resetting its shards' SCHEDULED rows, those rows came back and a copy of each
was fetched a second time.

Seen red with the committer's hosts left out of the skip set (12 URLs fetched twice in
the sim web's log), and with the fetches in flight left out (3 fetched twice).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from courtier.core.errors import StoreError
from courtier.sim.loop import run_virtual
from courtier.sim.run import SimCrawl, sim_config
from courtier.store.base import CommitResult, DueUrl, FetchCommit, HostStatsDelta
from courtier.store.memory import MemoryStore
from tests.sim.test_faults import allowed, one_event_per_url_version, page_counts, small_web


class AnswerLostStore(MemoryStore):
    """The ``lose_on``-th refill that returns rows while others returned earlier are not
    committed yet (fetches in flight, results waiting for a commit) is reported failed;
    commits fail for ``COMMITS_DOWN`` seconds from then (the cut took their connection
    too), so the results of that time still wait while the worker reads again."""

    COMMITS_DOWN = 3.0

    def __init__(self, crawl: SimCrawl, lose_on: int = 1) -> None:
        super().__init__(crawl.clock)
        self.clock = crawl.clock
        self.lose_on = lose_on
        self.busy_refills = 0
        self.held_at_loss = 0  # rows read and not committed before the lost refill
        self._read: dict[bytes, int] = {}  # url key → version of every row returned
        self.commits_down_until = float("-inf")
        self.failed_commits = 0

    async def commit(self, commits: Sequence[FetchCommit],
                     host_stats: Sequence[HostStatsDelta] = ()) -> CommitResult:
        if self.clock.now() < self.commits_down_until:
            self.failed_commits += 1
            raise StoreError("commit failed: connection lost (simulated)")
        return await super().commit(commits, host_stats)

    async def read_due(self, shards: Sequence[int], now: float, limit: int,
                       per_host_limit: int, skip_hosts: Collection[str] = (),
                       epochs: Mapping[int, int] | None = None) -> list[DueUrl]:
        held = sum(self.urls[key]["version"] == version for key, version in self._read.items())
        due = await super().read_due(shards, now, limit, per_host_limit, skip_hosts, epochs)
        self._read.update((d.url_key, d.version) for d in due)
        if due and held:
            self.busy_refills += 1
            if self.busy_refills == self.lose_on:
                self.held_at_loss = held
                self.commits_down_until = self.clock.now() + self.COMMITS_DOWN
                raise StoreError("read_due failed: connection lost before the answer (simulated)")
        return due


def test_the_recovery_from_a_lost_refill_answer_fetches_nothing_twice() -> None:
    async def go() -> None:
        web = small_web(n_hosts=4, pages=6)
        crawl = SimCrawl(web, sim_config(delay=0.5, host_window=2))  # several refills
        store = AnswerLostStore(crawl)
        crawl.store = store
        report = await crawl.run()
        assert store.held_at_loss > 0 and store.failed_commits > 0
        assert report.status.stop_reason == "nothing due"
        counts = page_counts(crawl)
        assert set(counts) == allowed(web)  # nothing lost, the lost refill's rows included
        assert max(counts.values()) == 1, sorted(k for k, n in counts.items() if n > 1)
        assert report.violations == []
        assert (await store.counts())["scheduled"] == 0
        await one_event_per_url_version(store)

    run_virtual(go())
