"""What a worker reads from and gives back to the store around the fetches, as a mixin
of :class:`~courtier.worker.Worker`: seeds and shared scope rules, policy overrides,
the refill (rows, then each new host's robots copy, policy, day counts and politeness
clock, all read before any of them is registered), releases, and the daily budget.

Every step that takes rows out of the store keeps them in memory when a later call
fails (``_loaded``, ``_unreleased``), so a store error never strands a row SCHEDULED.

The refill runs as a task beside the loop (``_start_refill``; one at a time): a refill
is a store round trip or several (rows, their plan values, new hosts' records), which
took up to seconds on PostgreSQL with thousands of rows, and the loop issued nothing
while it waited. The turn that starts it with fewer URLs in memory than the
concurrency waits ``REFILL_INLINE`` for it, so a quick refill still reaches the frontier
before that turn issues; with more, the turn issues at once. While a refill runs the
loop does not apply shard moves (nor renew the single process's leases), so every row
it adds belongs to a shard still held; a store error pauses refills for
``STORE_RETRY`` while fetches and commits go on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from courtier import planning
from courtier.cluster.shared_scope import ScopeFollower
from courtier.config import CrawlConfig
from courtier.day_counts import DayCountLedger
from courtier.domain_policy import policy_in_force, policy_of_record
from courtier.errors import StoreError
from courtier.frontier.budget import DailyBudget
from courtier.frontier.host import domain_host_key
from courtier.frontier.lease import Lease
from courtier.frontier.scheduler import Frontier
from courtier.intake import Intake, seed_scope_rules
from courtier.metrics import CrawlMetrics
from courtier.politeness.robots_offload import parse_off_loop
from courtier.process import PageProcessor
from courtier.records import DAY
from courtier.store.base import DAILY_BUDGET_KEY, DueUrl, FetchCommit, NewUrl, Store
from courtier.store.cluster import HostClock

log = logging.getLogger("courtier.worker")

#: rows one refill takes at most. The loop waits for the refill (a store round trip
#: plus the plan values of the rows); 10,000 rows at once held the dispatch for seconds
#: on PostgreSQL, while a refill every REFILL_EVERY of this many keeps ~8,000 rows/s
#: coming, several times what one worker fetches.
REFILL_MAX_ROWS = 2_000
#: seconds between refills while the frontier runs short of URLs in memory
REFILL_EVERY = 0.25
#: seconds between refills while it holds ample work (REFILL_AMPLE leases' worth)
REFILL_CALM = 1.0
REFILL_AMPLE = 16
#: seconds the turn waits for the refill it started before going on without it
REFILL_INLINE = 0.05
#: seconds to pause after a store error (the loop, or the refills after a failed one)
STORE_RETRY = 1.0


class RefillSteps:
    """The store side of the loop; the attributes are the worker's."""

    config: CrawlConfig
    store: Store
    frontier: Frontier
    intake: Intake
    processor: PageProcessor
    shards: list[int]
    agent: str
    resolve_ip: Callable[[str], Awaitable[str | None]] | None
    _pending: list[FetchCommit]
    _committing: list[FetchCommit]
    _task_leases: dict[asyncio.Task[None], Lease]
    _day_counts: DayCountLedger
    _budget: DailyBudget | None
    _budget_spent_until: float | None
    _scope_rules: ScopeFollower
    _loaded: list[DueUrl]
    _refill_uncertain: bool
    _unreleased: list[tuple[DueUrl, float]]
    _refill_task: asyncio.Task[None] | None
    _refill_retry_at: float
    _wakeup: asyncio.Event
    metrics: CrawlMetrics

    if TYPE_CHECKING:  # the worker's (worker.py, worker_shards.py); no stub may shadow them
        def request_stop(self, reason: str = "stopped") -> None: ...

        async def _load_host_clocks(self, host_keys: list[str]) -> dict[str, HostClock]: ...

        async def _restore_trap_stats(self, host_keys: list[str]) -> None: ...

        def _restore_host_clocks(self, host_keys: list[str],
                                 clocks: dict[str, HostClock]) -> None: ...

    async def add_seeds(self, rows: Sequence[NewUrl]) -> int:
        """Queue seed rows; their hosts join the scope of every worker of the crawl."""
        # the rules first: a worker that loads one of these rows has the rule to load too
        await self.store.add_scope_rules(seed_scope_rules(rows))
        added = await self.store.add_urls(rows)
        self.intake.remember(r.url_key for r in rows)
        return added

    async def _apply_scope_rules(self) -> None:
        """Scope rules added by any process (seeds given to another worker) apply here."""
        await self._scope_rules.poll(self.store)

    async def _apply_policies(self, since: float) -> None:
        """Apply policy overrides set by another process (CLI, API) to known hosts."""
        frontier = self.frontier
        for record in await self.store.policies_changed(since):
            key = record.host_key
            if frontier.knows_host(key):
                policy, inherited = await policy_in_force(self.store, key, record)
                frontier.set_policy(key, policy)
                frontier.hosts[key].inherited_policy = inherited
            own = policy_of_record(record)
            for host in list(frontier.hosts.values()):  # subdomains without their own policy
                if domain_host_key(host.host_key) == key and (
                        host.inherited_policy or host.policy.is_default()):
                    frontier.set_policy(host.host_key, own)
                    host.inherited_policy = not own.is_default()

    def _refill_interval(self) -> float:
        """Seconds from one refill to the next. Each is a store round trip with a cost of
        its own besides the rows (on PostgreSQL: fencing the shards, walking the host
        queue's levels); with REFILL_AMPLE times the concurrency queued in memory, one a
        second brings what became due at a quarter of that cost."""
        ample = self.frontier.queued >= REFILL_AMPLE * self.config.concurrency
        return REFILL_CALM if ample else REFILL_EVERY

    def _start_refill(self, now: float) -> asyncio.Task[None]:
        """Run :meth:`_refill` as a task of its own (see the module docstring)."""
        task = asyncio.create_task(self._refill_beside(now))
        self._refill_task = task
        task.add_done_callback(self._refill_done)
        return task

    def _refill_done(self, task: asyncio.Task[None]) -> None:
        if self._refill_task is task:
            self._refill_task = None
        self._wakeup.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("refill task failed", exc_info=task.exception())

    async def _refill_beside(self, now: float) -> None:
        try:
            await self._refill(now)
        except StoreError as exc:
            # a lost connection, a restarting server: what the refill took is kept
            # (``_loaded``, ``_refill_uncertain``) and handled by the next one
            self.metrics.store_pauses.inc()
            log.error("store unavailable for a refill, retrying in %.0f s: %s",
                      STORE_RETRY, exc)
            self._refill_retry_at = now + STORE_RETRY

    async def _settle_refill(self) -> None:
        """Wait for the refill under way, if any (without cancelling it if we are)."""
        task = self._refill_task
        if task is not None:
            await asyncio.wait({task})

    async def _refill(self, now: float) -> None:
        config, frontier = self.config, self.frontier
        room = config.memory_window - frontier.queued
        if room < config.memory_window // 2 or not self.shards:
            return
        if self._loaded:  # rows a failed refill took but could not hand to the frontier
            ours = set(self.shards)
            others = [(d, d.next_fetch_at) for d in self._loaded if d.shard not in ours]
            due = self._loaded = [d for d in self._loaded if d.shard in ours]
            await self._release_items(others)  # kept for the next call if this fails
        else:
            if self._refill_uncertain:
                await self._recover_refill()
            epochs = {s: frontier.epochs[s] for s in self.shards if s in frontier.epochs}
            try:
                due = await self.store.load_due(
                    self.shards, now, min(room, REFILL_MAX_ROWS), config.host_window,
                    skip_hosts=frontier.full_hosts(config.host_window // 2), epochs=epochs)
            except StoreError:
                # the refill may have been applied with its answer lost: rows SCHEDULED
                # that this worker never saw; recovered before the next refill
                self._refill_uncertain = True
                raise
            due = self._not_held(due)
        # from here the rows are SCHEDULED in the store: a store error keeps them in
        # memory (the next refill starts again from here), never stranded
        try:
            await planning.prepare(self.store, self.processor.planner, due)
            if due:  # scope rules stored with these rows' seeds apply before their links
                await self._apply_scope_rules()
            await self._register_hosts(due)
        except StoreError:
            self._loaded = due
            raise
        self._loaded = []
        frontier.add(due)
        frontier.forget_idle_hosts(keep=max(1000, config.memory_window // 4))

    async def _recover_refill(self) -> None:
        """After a refill whose outcome is unknown: return every SCHEDULED row of our
        shards to QUEUED (fenced by our epochs) and drop the queued copies in memory, so
        no row stays SCHEDULED unseen. Fetches in flight go on (their commits still
        apply), and the next refill leaves their rows to them (:meth:`_not_held`)."""
        epochs = {s: self.frontier.epochs[s] for s in self.shards if s in self.frontier.epochs}
        # releases still owed go first: made after the reset, they would return to QUEUED
        # a row that the next refill has just handed to the frontier again
        await self._release_items([])
        self.frontier.drain_shards(set(epochs))
        await self.store.reset_scheduled(sorted(epochs), epochs)
        self._refill_uncertain = False
        log.warning("refill outcome unknown after a store error: %d shards reset", len(epochs))

    def _not_held(self, due: list[DueUrl]) -> list[DueUrl]:
        """``due`` without the rows this worker holds already at the same version: a fetch
        in flight, a result waiting for its commit or in the commit under way. Such a row
        comes back after :meth:`_recover_refill` reset it; a copy in the frontier would be
        fetched once more after the first fetch, and usually after its commit. The holder
        settles the row as before: its commit applies (version and epoch still match), or
        a release of the lease returned finds it SCHEDULED; if the epoch moves on before,
        the shard's next owner resets the row."""
        held = {c.url_key: (c.version, c.epoch) for c in self._committing}
        held.update((c.url_key, (c.version, c.epoch)) for c in self._pending)
        held.update((lease.due.url_key, (lease.due.version, lease.epoch))
                    for lease in self._task_leases.values() if lease.due is not None)
        if not held:
            return due
        epochs = self.frontier.epochs  # a holder of an older epoch would commit nothing
        kept = [d for d in due if held.get(d.url_key) != (d.version, epochs.get(d.shard, 0))]
        if len(kept) < len(due):
            log.info("refill: %d rows held by fetches or commits of ours left to them",
                     len(due) - len(kept))
        return kept

    async def _register_hosts(self, due: list[DueUrl]) -> None:
        """Register the hosts of ``due`` not known yet: robots copy, policy, day counts and
        politeness clocks from the store (none is requested before this is done)."""
        frontier = self.frontier
        new_hosts = {d.host_key: d.shard for d in due if not frontier.knows_host(d.host_key)}
        if not new_hosts:
            return
        # every store read first: a failure registers nothing, and the retry does it all
        found = []
        for host_key, shard in new_hosts.items():
            record = await self.store.load_host(host_key)
            policy, inherited = await policy_in_force(self.store, host_key, record)
            found.append((host_key, shard, record, policy, inherited))
        budgeted = [key for key, _, _, policy, _ in found if policy.max_pages is not None]
        counts = await self.store.load_day_counts(budgeted) if budgeted else {}
        clocks = await self._load_host_clocks(list(new_hosts))
        await self._restore_trap_stats(list(new_hosts))  # before any link of theirs is read
        for host_key, shard, record, policy, inherited in found:
            ip = await self.resolve_ip(host_key) if self.resolve_ip is not None else None
            robots = (await parse_off_loop(record.robots_body, self.agent)
                      if record is not None and record.robots_body is not None else None)
            frontier.register_host(host_key, shard, record, ip, robots)
            if inherited:  # the registrable domain's policy covers this subdomain
                frontier.set_policy(host_key, policy)
                frontier.hosts[host_key].inherited_policy = True
        for count in counts.values():  # max-pages-per-day windows continue across restarts
            frontier.restore_day_pages(count.key, count.day_start, count.used)
        self._restore_host_clocks(list(new_hosts), clocks)  # before any request to them

    def _collect_denials(self, now: float) -> None:
        for due, reason, digest in self.frontier.take_denied():
            epoch = self.frontier.epochs.get(due.shard, 0)
            self._pending.append(self.processor.denied(due, reason, digest, epoch, now))

    async def _release_returned(self) -> None:
        await self._release_items(self.frontier.take_released())

    async def _release_items(self, items: list[tuple[DueUrl, float]]) -> None:
        """Give URLs back to the store, only for shards still held with our epoch. After a
        store error they are kept and go with the next call."""
        if self._unreleased:
            items, self._unreleased = self._unreleased + items, []
        if not items:
            return
        try:
            await self.store.release([(due.url_key, at) for due, at in items],
                                     epochs=dict(self.frontier.epochs))
        except StoreError:
            self._unreleased = items + self._unreleased  # and what another call kept meanwhile
            raise

    def _adopt_day_counts(self, now: float) -> None:
        """The store's counts (every worker's fetches) replace ours when they are higher:
        N workers share one daily budget and one per-host day count."""
        grants, self._day_counts.grants = self._day_counts.grants, {}
        for key, grant in grants.items():
            if key == DAILY_BUDGET_KEY:
                budget = self._budget
                if budget is not None and 0 <= now - grant.day_start < DAY and (
                        grant.day_start != budget.day_start or grant.used > budget.used):
                    budget.day_start = grant.day_start
                    budget.used = max(budget.used, grant.used)
                continue
            host = self.frontier.hosts.get(key)
            if host is not None and host.day_start is not None and grant.used > host.day_pages:
                self.frontier.restore_day_pages(key, grant.day_start, grant.used)

    async def _restore_budget(self, now: float) -> None:
        """The global daily budget continues the window an earlier run saved."""
        if self.config.daily_budget is None:
            return
        self._budget = DailyBudget(self.config.daily_budget, now)
        saved = (await self.store.load_day_counts([DAILY_BUDGET_KEY])).get(DAILY_BUDGET_KEY)
        if saved is not None:
            self._budget.restore(saved.day_start, saved.used, now)

    def _budget_left(self, now: float) -> bool:
        """The global daily fetch budget, paced (see frontier/budget.py)."""
        if self.config.daily_budget is None:
            return True
        if self._budget is None:
            self._budget = DailyBudget(self.config.daily_budget, now)
        if self._budget.allows(now):
            self._budget_spent_until = None
            return True
        self._budget_spent_until = self._budget.next_allowed(now)
        if self._budget.spent_for_today(now) and not self.config.continuous:
            self.request_stop("daily budget spent")
        return False
