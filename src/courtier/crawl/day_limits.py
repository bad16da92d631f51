"""The day's limits of one worker (:class:`DayLimits`): the crawl-wide daily budget
(``--daily-budget``) and the per-host max-pages-per-day counts, shared by every worker of
a crawl through the store's write-ahead counts (:mod:`courtier.crawl.day_counts`).

Owns: the :class:`~courtier.frontier.budget.DailyBudget` (paced), the write-ahead
:class:`~courtier.crawl.day_counts.DayCountLedger`, and until when the budget is spent.

Invariants:

* a page lease's count is noted when the lease is issued and is in the store before its
  request is sent (:meth:`write_ahead`): a crash never spends a budget twice;
* the store's counts (every worker's fetches) replace ours when they are higher
  (:meth:`adopt`), so N workers share one day's count and one count per host: the day's
  total passes the budget by at most the leases other workers issued since our last
  store answer (the write-ahead lag);
* the budget's pacing is this worker's part of the crawl's: before each decision the
  bucket takes the share of the shards held now (``held_share``), so the buckets of N
  workers together fill at the budget's rate and hold one hour's share
  (:mod:`courtier.frontier.budget` says why, and how handovers and crashes keep it);
* a one-shot crawl whose budget is spent for the day stops (``request_stop``).
"""

from __future__ import annotations

from collections.abc import Callable

from courtier.core.config import CrawlConfig
from courtier.core.records import DAY
from courtier.crawl.day_counts import DayCountLedger
from courtier.crawl.metrics import CrawlMetrics
from courtier.frontier.budget import DailyBudget
from courtier.frontier.host import HostState
from courtier.frontier.scheduler import Frontier
from courtier.store.base import DAILY_BUDGET_KEY, Store


class DayLimits:
    """The daily budget and the per-host day counts of one worker."""

    def __init__(self, config: CrawlConfig, store: Store, frontier: Frontier,
                 request_stop: Callable[[str], None], metrics: CrawlMetrics,
                 held_share: Callable[[], float]) -> None:
        self._config = config
        #: the shards this worker holds now, as a share of all shards (0 to 1)
        self._held_share = held_share
        self._metrics = metrics
        self._store = store
        self._frontier = frontier
        self._request_stop = request_stop
        self._ledger = DayCountLedger(store)
        self._budget: DailyBudget | None = None
        #: the budget is spent until this time (None: it is not)
        self.spent_until: float | None = None

    async def begin(self, now: float) -> None:
        """Begin the budget's pacing once this worker holds a shard (each turn; a no-op
        after the first time): full at its share when no fetch of the day's window is in
        the store yet, else empty, continuing the stored window and its count.

        Why only then: a worker gains shards from the store after the leaver has cut its
        own tokens and counted in the store every request it sent from them (write-ahead,
        drained before the release), so a stored count of 0 read *after* the gain means
        nobody has sent a request of this window yet, and the buckets then held sum to at
        most one hour's share. Begun at start-up instead, with no shard yet, two workers
        starting together would both find an empty store and both start full."""
        if self._config.daily_budget is None or self._budget is not None:
            return
        share = self._held_share()
        if share <= 0.0:
            return
        saved = (await self._store.load_day_counts([DAILY_BUDGET_KEY])).get(DAILY_BUDGET_KEY)
        budget = DailyBudget(self._config.daily_budget, now, share)
        if saved is not None:
            budget.restore(saved.day_start, saved.used, now)
        self._budget = budget

    def allows(self, now: float) -> bool:
        """The global daily fetch budget, paced (see frontier/budget.py); nothing starts
        before the budget's day has :meth:`begin` (no shard is held before then)."""
        if self._config.daily_budget is None:
            return True
        budget = self._budget
        if budget is None:
            return False
        budget.set_share(self._held_share(), now)
        if budget.allows(now):
            self.spent_until = None
            return True
        if self.spent_until is None:  # the budget begins holding fetches back
            self._metrics.daily_budget_spent.inc()
        self.spent_until = budget.next_allowed(now)
        if budget.spent_for_today(now) and not self._config.continuous:
            self._request_stop("daily budget spent")
        return False

    def count_page(self, issued_at: float, host: HostState) -> None:
        """A page lease was issued: count it against the budget and its host's day."""
        if self._budget is not None:
            self._budget.spend(issued_at)
            self._ledger.add(DAILY_BUDGET_KEY, self._budget.day_start)
        cap = host.policy.max_pages
        if cap is not None and host.day_start is not None:
            self._ledger.add(host.host_key, host.day_start)
            if host.day_pages == cap:  # this lease is the host's last of its day
                self._metrics.host_day_caps.inc()

    async def write_ahead(self) -> None:
        """Return once every count noted so far is in the store (before a request)."""
        if self._ledger.pending:
            await self._ledger.saved()

    def adopt(self, now: float) -> None:
        """The store's counts (every worker's fetches) replace ours when they are higher."""
        grants, self._ledger.grants = self._ledger.grants, {}
        for key, grant in grants.items():
            if key == DAILY_BUDGET_KEY:
                budget = self._budget
                if budget is not None and 0 <= now - grant.day_start < DAY and (
                        grant.day_start != budget.day_start or grant.used > budget.used):
                    budget.day_start = grant.day_start
                    budget.used = max(budget.used, grant.used)
                continue
            host = self._frontier.hosts.get(key)
            if host is not None and host.day_start is not None and grant.used > host.day_pages:
                self._frontier.restore_day_pages(key, grant.day_start, grant.used)
